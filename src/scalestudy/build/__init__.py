"""The paper builder: MLflow runs -> tidy table -> derived numbers -> figures and LaTeX tables."""
