"""The paper builder (python -m scalestudy.paper): MLflow runs -> tidy table -> derived numbers -> figures
and LaTeX tables."""
