;;; emacs_check.el --- batch Emacs + eglot against the real pallas-lsp server -*- lexical-binding: t -*-
;;
;;   PALLAS_FILE=kernel.py PALLAS_DOC=docs/editors/emacs.md \
;;     emacs -Q --batch -l tests/editors/emacs_check.el
;;
;; Uses Debian's elpa-eglot (Emacs 28) or the eglot built into Emacs 29+.
;; Evaluates the block marked `<!-- test: eglot -->` in PALLAS_DOC as written
;; (`pallas-lsp` must be on PATH: the tests put a shim there), opens the
;; kernel and starts eglot explicitly (`eglot-ensure' does not fire in batch
;; mode). Checks the diagnostic, the hover and the quick fix, and prints one
;; line "PALLAS_RESULT <json>" to stdout.

(require 'package)
(add-to-list 'package-directory-list "/usr/share/emacs/site-lisp/elpa")
(package-initialize)
(require 'eglot)
(require 'flymake)
(require 'json)
(require 'python)
(require 'cl-lib)

(defvar pallas-result (list (cons 'ok :json-false) (cons 'steps nil)))

(defun pallas-put (key value)
  (setf (alist-get key pallas-result) value))

(defun pallas-step (name &optional value)
  (pallas-put 'steps (vconcat (alist-get 'steps pallas-result) (list (symbol-name name))))
  (when value (pallas-put name value)))

(defun pallas-finish (code)
  (princ (concat "PALLAS_RESULT " (json-encode pallas-result) "\n"))
  (kill-emacs code))

(defun pallas-wait (seconds predicate what)
  (let ((deadline (+ (float-time) seconds)))
    (while (and (not (funcall predicate)) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (unless (funcall predicate)
      (error "timed out waiting for %s" what))))

(let ((timeout (string-to-number (or (getenv "PALLAS_TIMEOUT_S") "60"))))
  (run-with-timer timeout nil
                  (lambda ()
                    (pallas-put 'error (format "watchdog: no result after %ss (last step: %s)"
                                               timeout (alist-get 'steps pallas-result)))
                    (pallas-finish 3))))

(defvar pallas-messages nil "Every window/showMessage from the server.")

(defun pallas-doc-block (path name)
  "The elisp block marked <!-- test: NAME --> in the markdown file PATH."
  (with-temp-buffer
    (insert-file-contents path)
    (goto-char (point-min))
    (unless (search-forward (format "<!-- test: %s -->" name) nil t)
      (error "no block marked <!-- test: %s --> in %s" name path))
    (re-search-forward "^```elisp\n")
    (let ((start (point)))
      (re-search-forward "^```$")
      (buffer-substring-no-properties start (match-beginning 0)))))

(defun pallas-main ()
  (let* ((file (or (getenv "PALLAS_FILE") (error "PALLAS_FILE is not set")))
         (doc (or (getenv "PALLAS_DOC") (error "PALLAS_DOC is not set"))))
    (pallas-put 'emacs emacs-version)
    (pallas-put 'eglot (or (ignore-errors
                             (package-version-join
                              (package-desc-version (cadr (assq 'eglot package-alist)))))
                           "built-in"))
    (advice-add 'eglot-handle-notification :before
                (lambda (_server method &rest params)
                  (when (eq method 'window/showMessage)
                    (push (plist-get params :message) pallas-messages))))
    ;; the configuration docs/editors/emacs.md documents, as written
    (eval (car (read-from-string (concat "(progn " (pallas-doc-block doc "eglot") "\n)"))) t)
    (pallas-step 'configured)
    (find-file file)
    (python-mode)
    (apply #'eglot (eglot--guess-contact))
    (pallas-wait 20 (lambda () (eglot-current-server)) "eglot to connect")
    (pallas-step 'connected)

    ;; 1. the diagnostic (published to eglot, then reported to flymake)
    (pallas-wait 30 (lambda () eglot--diagnostics) "diagnostics")
    (flymake-start)
    (pallas-wait 10 (lambda () (flymake-diagnostics)) "flymake to report")
    (let* ((diag (car (flymake-diagnostics)))
           (lsp (cdr (assoc 'eglot-lsp-diag (flymake-diagnostic-data diag))))
           (beg (flymake-diagnostic-beg diag))
           (end (flymake-diagnostic-end diag)))
      (pallas-step 'diagnostic
                   (list (cons 'code (plist-get lsp :code))
                         (cons 'line (line-number-at-pos beg))
                         (cons 'text (buffer-substring-no-properties beg end))
                         (cons 'message (flymake-diagnostic-text diag))))

      ;; 2. hover on `sem` in the same line
      (goto-char beg)
      (re-search-forward "\\_<sem)" (line-end-position))
      (goto-char (match-beginning 0))
      (let* ((hover (jsonrpc-request (eglot--current-server-or-lose) :textDocument/hover
                                     (eglot--TextDocumentPositionParams)))
             (contents (plist-get hover :contents)))
        (pallas-step 'hover (if (stringp contents) contents (plist-get contents :value))))

      ;; 3. the quick fix, applied the way `eglot-code-actions' applies it
      (let* ((actions (eglot-code-actions beg end "quickfix"))
             (chosen (cl-find-if (lambda (a) (eq (plist-get a :isPreferred) t)) actions)))
        (pallas-step 'actions (vconcat (mapcar (lambda (a) (plist-get a :title)) actions)))
        (unless chosen (error "no preferred quick fix"))
        (eglot--read-execute-code-action (list chosen) (eglot--current-server-or-lose) "quickfix")
        (pallas-step 'applied (plist-get chosen :title))
        (pallas-put 'fixed_line (buffer-substring-no-properties (line-beginning-position)
                                                               (line-end-position)))))

    ;; 4. the diagnostic goes away.  eglot sends didChange from an idle timer,
    ;; which batch mode never runs: send it now.
    (eglot--signal-textDocument/didChange)
    (pallas-wait 30 (lambda () (null eglot--diagnostics)) "the diagnostic to go away")
    (pallas-step 'cleared)

    (eglot-shutdown (eglot--current-server-or-lose))
    (pallas-step 'stopped)
    (pallas-put 'messages (vconcat (reverse pallas-messages)))
    (pallas-put 'ok t)))

(condition-case err
    (progn (pallas-main) (pallas-finish 0))
  (error
   (pallas-put 'error (error-message-string err))
   (pallas-finish 1)))
