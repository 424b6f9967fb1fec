"""Small, dependency-light I/O helpers shared by every stage: atomic outputs and TFRecords."""
