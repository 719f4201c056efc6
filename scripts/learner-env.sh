# Sourced by scripts/test.sh (bash): the tests run as a learner's shell does.
# Variables a build machine sets and a laptop does not change what Python and pip do (no
# bytecode written, unbuffered output, a private wheelhouse, BLAS threads), and a test that
# passes only with them proves nothing for a learner: they are unset, for setup and tests
# alike. Kept: how this machine reaches a package index (a mirror's PIP_INDEX_URL, PIP_CERT, the
# CA bundle variables): access, not behaviour.
# PIP_FIND_LINKS is kept for torch alone, as KFLAB_TORCH_FIND_LINKS (read by
# scripts/install_locked.py and tests/integration/test_packaging.py): torch==2.13.0 from PyPI is
# the multi-GB CUDA build, and a wheelhouse may hold the CPU one.
# KFLAB_LEARNER_ENV=1 tells the tests that this was done (tests/unit/test_learner_env.py).
export KFLAB_TORCH_FIND_LINKS="${KFLAB_TORCH_FIND_LINKS:-${PIP_FIND_LINKS:-}}"
kflab_dropped=()
for kflab_var in $(compgen -e); do
  case "$kflab_var" in
    PYTHONDONTWRITEBYTECODE|PYTHONUNBUFFERED|PYTHONPATH|PYTHONHASHSEED|PYTHONWARNINGS|\
    PYTHONSTARTUP|PYTHONNOUSERSITE|PYTHONOPTIMIZE|PYTHONSAFEPATH|PYTHONPYCACHEPREFIX|\
    PIP_FIND_LINKS|PIP_NO_INDEX|PIP_CONSTRAINT|PIP_DEFAULT_TIMEOUT|\
    PIP_DISABLE_PIP_VERSION_CHECK|PIP_NO_CACHE_DIR|PIP_REQUIRE_VIRTUALENV|PIP_NO_COMPILE|\
    OPENBLAS_*|OMP_*|MKL_*|NVPL_*|GOTO_NUM_THREADS|VECLIB_MAXIMUM_THREADS|VIRTUAL_ENV|CONDA_*|\
    PYENV_*)
      kflab_dropped+=("$kflab_var"); unset "$kflab_var" ;;
  esac
done
if [ ${#kflab_dropped[@]} -gt 0 ]; then
  echo "== test environment: unset ${kflab_dropped[*]} (a learner's shell has none of them)"
fi
export KFLAB_LEARNER_ENV=1
unset kflab_var kflab_dropped
