"""The owners' page at /admin, served by `citebot serve` (read-only, plain HTML with inline
SVG, no JavaScript), and the weekly gaps digest. Why so: docs/decisions/0040-admin-page.md."""
