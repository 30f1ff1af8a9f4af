# The two commands of the README: `make demo` and `make test`. Each sets up everything it needs first
# (tools/setup_env.sh prints the python of a ready environment).

.PHONY: demo test lint

demo:
	py=$$(tools/setup_env.sh) && PYTHON=$$py tools/demo.sh $(ARGS)

test:
	py=$$(tools/setup_env.sh) && $$py -m ruff check . && $$py -m pytest -q $(ARGS)

lint:
	py=$$(tools/setup_env.sh) && $$py -m ruff check .
