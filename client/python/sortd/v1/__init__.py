# Generated stubs for proto/sortd/v1/sort.proto; see ../__init__.py.
