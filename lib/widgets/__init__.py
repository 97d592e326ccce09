"""Widgets and plots that read Traces and ``lib.costs``; each visual comes in three tiers (see CONTRIBUTING.md):
a static matplotlib figure or table, a plotly step-through that survives export, and a live ipywidgets view."""
