"""Tests of the project as a whole: README and docs executed, the layout, the layering."""
