"""Pure estimators: stdlib + catalog schema types only. No I/O, no torch."""
