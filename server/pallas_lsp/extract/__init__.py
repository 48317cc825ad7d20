"""Data-extraction scripts, run by hand against the installed jax (they import
jax; nothing else in pallas_lsp imports them): their output is shipped as
package data."""
