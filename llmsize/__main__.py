from llmsize.cli import main

main()
