"""The package version, in one place (read by the CLI, golden files and packaging)."""

VERSION = "0.1.0"
