"""A notebook user's first model from the app's wheel, in a fresh venv without a Rust toolchain.

Run by `tests/tests/python_package.rs` (`the_wheel_trains_without_a_toolchain`) with the venv's
python, PATH limited to the venv's `bin`, `/usr/bin` and `/bin`, and no other variables but `HOME`,
`EASEML_HOME` (a fresh store), `EASEML_PY_APP` (an app with one tensor input and declared labels)
and `EASEML_PY_BUDGET`. Plain Python (pytest is not installed there): feed, train, infer, each timed.
"""

import importlib
import os
import shutil
import time

started = time.perf_counter()
assert shutil.which("cargo") is None, "cargo is on the PATH: the test would not show the wheel needs none"
assert not any(name.startswith(("CARGO", "LIBTORCH", "LD_LIBRARY")) for name in os.environ), sorted(os.environ)

import numpy as np  # noqa: E402

app_module = importlib.import_module(os.environ["EASEML_PY_APP"])
imported = time.perf_counter()
package = os.path.dirname(os.path.abspath(app_module.__file__))
for command in ("train", "infer", "refine"):
    binary = app_module._engine_binary(command)
    assert binary == os.path.join(package, "bin", f"{app_module.APP}-{command}"), binary

(shape,) = app_module.INPUT_SHAPES.values()
labels = app_module.LABELS
assert labels is not None, "an app with declared labels"
rng = np.random.default_rng(0)
signs = np.where(np.arange(40) % 2 == 0, 1.0, -1.0)
inputs = (signs.reshape((-1,) + (1,) * len(shape)) + 0.1 * rng.standard_normal((40,) + shape)).astype(np.float32)
outputs = [labels[0] if sign > 0 else labels[1] for sign in signs]

app = app_module.connect()
assert app.feed(inputs, outputs)["added"] == 40
fed = time.perf_counter()
status = app.train(budget=os.environ["EASEML_PY_BUDGET"], progress=False)
trained = time.perf_counter()
assert status["best"] is not None, status
answers, confidences = app.infer(inputs)
answered = time.perf_counter()
assert len(answers) == 40 and set(answers) <= set(labels), answers
accuracy = float(np.mean([answer == truth for answer, truth in zip(answers, outputs)]))
print(
    f"import {imported - started:.2f} s, feed {fed - imported:.2f} s, train {trained - fed:.1f} s "
    f"({len(status['runs'])} run(s), serving {status['best']['candidate']}), infer {answered - trained:.2f} s, "
    f"training accuracy {accuracy:.2f}"
)
