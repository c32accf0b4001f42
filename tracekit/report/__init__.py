"""Rendering: the document model, one renderer per format, the HTML report, pictures, plots and exports."""
