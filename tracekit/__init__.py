"""tracekit: floor-first triage of LLM serving and training traces."""

__version__ = "0.1.0"
