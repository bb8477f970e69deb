#!/usr/bin/env bash
# Runs the Array API standard's own test suite (data-apis/array-api-tests) on plax.numpy.
#
# Usage: tests/array_api/run_array_api_tests.sh [ARRAY_API_TESTS_DIR [ARRAY_API_DIR]] [-- PYTEST_ARGS...]
#
#   ARRAY_API_TESTS_DIR  a tree of data-apis/array-api-tests at commit 55fcc60 (default:
#                        $ARRAY_API_TESTS_DIR, else /tmp/array-api-tests, cloned with git when
#                        missing and the network allows).
#   ARRAY_API_DIR        a tree of data-apis/array-api at 5f847a38, the suite's `array-api`
#                        submodule (default: ARRAY_API_TESTS_DIR/array-api, cloned when missing).
#
# The Python that runs it ($PYTHON, default `python`) must import plax (the README's install
# does that) and have the suite's requirements: pytest, hypothesis>=6.151, ndindex>=1.8
# and pytest-json-report (the suite's conftest asks for its `json_metadata` fixture).
# x64 is on, as the standard's users run it (JAX_ENABLE_X64=1; plax reads the same variable);
# --max-examples=20 unless PYTEST_ARGS say otherwise, and no Hypothesis deadline (a loaded machine
# must not fail a test by its timing). Nothing is fetched when both trees exist.
# The failures this leaves, and why, are in docs/design_decisions.md ("The Array API test suite").
set -euo pipefail

TESTS_COMMIT=55fcc60
SPEC_COMMIT=5f847a38
PYTHON=${PYTHON:-python}

tests_dir=${ARRAY_API_TESTS_DIR:-/tmp/array-api-tests}
spec_dir=""
if [[ $# -gt 0 && $1 != "--" ]]; then tests_dir=$1; shift; fi
if [[ $# -gt 0 && $1 != "--" ]]; then spec_dir=$1; shift; fi
if [[ $# -gt 0 && $1 == "--" ]]; then shift; fi
spec_dir=${spec_dir:-$tests_dir/array-api}

clone() {  # clone URL DIR COMMIT
    echo "fetching $1 at $3 into $2" >&2
    git clone --quiet "$1" "$2"
    git -C "$2" checkout --quiet "$3"
}
[[ -d $tests_dir/array_api_tests ]] ||
    clone https://github.com/data-apis/array-api-tests "$tests_dir" "$TESTS_COMMIT"
if [[ ! -d $spec_dir/spec && ! -d $spec_dir/src ]]; then
    rm -rf "$spec_dir"  # an empty submodule directory
    clone https://github.com/data-apis/array-api "$spec_dir" "$SPEC_COMMIT"
fi
# the suite reads the standard from <tests>/array-api
if [[ $(cd "$spec_dir" && pwd) != $(cd "$tests_dir" && pwd)/array-api ]]; then
    rm -rf "$tests_dir/array-api"
    ln -s "$(cd "$spec_dir" && pwd)" "$tests_dir/array-api"
fi

cd "$tests_dir"
export ARRAY_API_TESTS_MODULE=plax.numpy JAX_ENABLE_X64=1
exec "$PYTHON" -m pytest array_api_tests --max-examples=20 --hypothesis-disable-deadline -q -rfE \
    -p no:randomly -p no:cacheprovider "$@"
