# The two README commands. Both work on a fresh machine with only python3:
# they create .venv, install the pinned dependencies and the package, then run.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: test verify bench docs install clean mpi-libs

$(STAMP): pyproject.toml constraints.txt impl/_shmkernel.c
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt setuptools wheel
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt --no-build-isolation -e '.[test,plot,docs]'
	$(MAKE) --no-print-directory mpi-libs
	touch $(STAMP)

# MPICH and Intel MPI, each in a prefix of its own under $(VENV)/mpi (their
# lib/libmpi.so.12 and bin/mpiexec would collide with Open MPI's and each
# other's in the venv). Open MPI stays in the venv itself; the one mpi4py
# picks the library at run time (collspec.conformance.mpi_libs).
# impi-rt's libfabric dependency is not installed: it runs with I_MPI_FABRICS=shm.
mpi-libs:
	rm -rf $(VENV)/mpi
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt --no-deps --prefix $(VENV)/mpi/mpich mpich
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt --no-deps --prefix $(VENV)/mpi/intelmpi impi-rt

install: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

verify: $(STAMP)
	$(BIN)/collspec verify

# The offline HTML reference, into build/docs/ (index.html); see docs/sitegen.py.
docs: $(STAMP)
	$(BIN)/python docs/sitegen.py build --doctest

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
