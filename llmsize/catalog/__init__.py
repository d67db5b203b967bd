"""Catalog: YAML files under hardware/ and models/, validated by the schemas in schema.py."""
