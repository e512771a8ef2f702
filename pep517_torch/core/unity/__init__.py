"""Unity translation units: which torch-heavy files share one TU, the generated TU, and which groups an incremental build compiles again."""
