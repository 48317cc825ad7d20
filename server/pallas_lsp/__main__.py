from pallas_lsp.cli import main

raise SystemExit(main())
