"""Views of each command's result (rich table, Markdown, JSON) and figures."""
