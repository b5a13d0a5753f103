#!/usr/bin/env bash
# Answer-quality evaluation: set up, fetch the eval documents, build the CLI, then ask every question
# of tests/eval/questions.jsonl and score the citations and answers (tests/eval/README.md).
#
#   scripts/eval.sh                          everything (long: one ask is 30-90 s on a CPU)
#   scripts/eval.sh --limit 10 --tag quick   the first 10 questions, results in build/eval/results-quick.jsonl
#   scripts/eval.sh --core-only --limit 5    what the `model` test runs (documents setup.sh fetches)
#   scripts/eval.sh --cli PATH ...           use that sightline-cli, build nothing
#   SIGHTLINE_EVAL_NO_BUILD=1 ...            build nothing (use build/release/app/sightline-cli)
#   scripts/eval.sh report FILE.jsonl        the summary table of a results file (no set-up)
#   scripts/eval.sh compare A.jsonl B.jsonl  before / after, and the questions that flipped
#
# Every other option goes to `tests/eval/eval.py run` (python3 tests/eval/eval.py run --help).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/env.sh
source "$here/env.sh"
eval_py="$SIGHTLINE_ROOT/tests/eval/eval.py"

case "${1:-}" in
  report|compare) exec python3 "$eval_py" "$@" ;;
  run) shift ;;
esac

have_cli=0
for a in "$@"; do
  case "$a" in
    --cli|--cli=*) have_cli=1 ;;
  esac
done

"$here/setup.sh"
if [ -x "$here/eval_assets.sh" ] || [ -f "$here/eval_assets.sh" ]; then
  bash "$here/eval_assets.sh"
fi
if [ "$have_cli" = 0 ] && [ "${SIGHTLINE_EVAL_NO_BUILD:-0}" != 1 ]; then
  "$here/build.sh" release sightline-cli
fi
cd "$SIGHTLINE_ROOT"
exec python3 "$eval_py" run "$@"
