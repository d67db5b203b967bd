"""The commands of the command line, a module each (cli.py registers them in help order); no arithmetic here."""
