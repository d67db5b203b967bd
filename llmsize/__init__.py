"""llmsize: size LLM inference before you buy or deploy, then measure it on the card."""

__version__ = "0.1.0"
