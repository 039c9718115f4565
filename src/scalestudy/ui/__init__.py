"""The MLflow UI on this repository's store: `server` starts it (python -m scalestudy.ui), `links` makes the links and
saved views of the runs behind each experiment, figure and table (pure functions, shared with the figure builder)."""
