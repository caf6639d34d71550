"""The generated Python package of one example app, driven from Python as a notebook would.

`tests/tests/python_package.rs` builds the package of each example it covers into a venv and runs
this file with `EASEML_PY_APP` (the app's module) and `EASEML_PY_STUBS` (its generated `.pyi`).
Every test uses its own store (`EASEML_HOME` in a temporary folder).
"""

import ast
import importlib
import os
import subprocess
import sys
import urllib.request

import numpy as np
import pytest

APP = os.environ["EASEML_PY_APP"]
app_module = importlib.import_module(APP)


@pytest.fixture()
def app(tmp_path, monkeypatch):
    monkeypatch.setenv("EASEML_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("EASEML_SERVER", raising=False)
    return app_module.connect()


def shape_text(shape):
    return "[" + ",".join(str(side) for side in shape) + "]"


def recursive_value(rng, sign, shapes, links):
    """One value of a recursive side in its JSON form: a chain (one link) as a list of 3 to 5
    records, a tree (two or more links) as nested records whose absent children are null; every
    tensor near `sign`."""

    def record():
        return {
            name: (sign + 0.1 * rng.standard_normal(shape)).astype(np.float32).tolist()
            for name, shape in shapes.items()
        }

    if len(links) == 1:
        return [record() for _ in range(int(rng.integers(3, 6)))]

    def node(depth):
        value = record()
        for link in links:
            value[link] = node(depth - 1) if depth > 0 and rng.random() < 0.6 else None
        return value

    return node(2)


def make_examples(count, seed=0):
    """`count` inputs and outputs with a pattern a model can learn: the class (or the regression
    target) follows the sign of the inputs' mean."""
    rng = np.random.default_rng(seed)
    signs = np.where(np.arange(count) % 2 == 0, 1.0, -1.0).astype(np.float32)
    if app_module.INPUT_RECURSIVE:
        inputs = [
            recursive_value(rng, sign, app_module.INPUT_SHAPES, app_module._INPUT_LINKS) for sign in signs
        ]
    else:
        inputs = {
            name: (signs.reshape((-1,) + (1,) * len(shape)) + 0.1 * rng.standard_normal((count,) + shape)).astype(
                np.float32
            )
            for name, shape in app_module.INPUT_SHAPES.items()
        }
        if len(inputs) == 1:
            inputs = next(iter(inputs.values()))
    if app_module.LABELS is not None:
        outputs = [app_module.LABELS[0] if sign > 0 else app_module.LABELS[1] for sign in signs]
    elif app_module.OUTPUT_RECURSIVE:
        outputs = [
            recursive_value(rng, sign, app_module.OUTPUT_SHAPES, app_module._OUTPUT_LINKS) for sign in signs
        ]
    else:
        outputs = {
            name: np.repeat(signs.reshape((-1,) + (1,) * len(shape)), int(np.prod(shape)), axis=-1)
            .reshape((count,) + shape)
            .astype(np.float32)
            for name, shape in app_module.OUTPUT_SHAPES.items()
        }
        if len(outputs) == 1:
            outputs = next(iter(outputs.values()))
    return inputs, outputs


def test_the_stubs_parse_and_name_the_fields_and_labels():
    tree = ast.parse(open(os.environ["EASEML_PY_STUBS"]).read())

    def typed_dict_keys(name):
        (call,) = [
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets)
        ]
        assert isinstance(call, ast.Call) and call.func.id == "TypedDict", ast.dump(call)
        return {key.value for key in call.args[1].keys}

    assert set(app_module.INPUT_SHAPES) <= typed_dict_keys("InputFields")
    assert set(app_module.OUTPUT_SHAPES) <= typed_dict_keys("OutputFields")
    labels = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "Label" for t in node.targets)
    ]
    assert len(labels) == 1
    if app_module.LABELS is not None:
        literal = labels[0].value
        assert isinstance(literal, ast.Subscript) and literal.value.id == "Literal"
        names = [element.value for element in literal.slice.elts]
        assert names == app_module.LABELS
    # Every public function of the module has a stub.
    stubbed = {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    assert {"connect", "App", "RefinePage"} <= stubbed
    assert {"feed", "infer", "train", "status", "examples", "enable", "disable", "refine"} <= stubbed


def test_import_loads_neither_pandas_nor_pil():
    # pandas and PIL are optional: found by their types when the caller has imported them.
    code = f"import sys, {APP}; print('pandas' in sys.modules, 'PIL' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"], done.stdout + done.stderr


def test_a_wrong_numpy_shape_names_the_field_and_the_expected_shape(app):
    if app_module.INPUT_RECURSIVE:
        pytest.skip("a recursive input is given in its JSON form; its shapes are checked by the client")
    name, shape = next(iter(app_module.INPUT_SHAPES.items()))
    wrong = tuple(side + 1 for side in shape)
    inputs, outputs = make_examples(4)
    if isinstance(inputs, dict):
        inputs[name] = np.zeros((4,) + wrong, dtype=np.float32)
    else:
        inputs = np.zeros((4,) + wrong, dtype=np.float32)
    with pytest.raises(app_module.ShapeError) as raised:
        app.feed(inputs, outputs)
    message = str(raised.value)
    assert f"input.{name}" in message and shape_text(shape) in message, message
    assert shape_text((4,) + wrong) in message, message
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, app_module.EasemlError)
    assert app.examples() == []


def test_errors_map_to_their_exception_classes(app, tmp_path, monkeypatch):
    with pytest.raises(app_module.NoModelError) as raised:
        inputs, _ = make_examples(1)
        app.infer(inputs)
    assert "no model" in str(raised.value)
    with pytest.raises(app_module.UnreachableError) as raised:
        app_module.connect(server="http://127.0.0.1:9")
    assert isinstance(raised.value, ConnectionError)
    with pytest.raises(app_module.ServerUrlError):
        app_module.connect(server="ftp://example.org")
    if app_module.LABELS is not None:
        inputs, _ = make_examples(2)
        with pytest.raises(app_module.BadInputError) as raised:
            app.feed(inputs, ["no such label", app_module.LABELS[0]])
        assert "no such label" in str(raised.value)
    with pytest.raises(app_module.StoreError):
        app.disable(123456789)
    if app_module.LABELS is not None:
        inputs, _ = make_examples(2)
        with pytest.raises(app_module.BadInputError) as raised:
            app.feed(inputs, [0, len(app_module.LABELS)])
        assert f"label index {len(app_module.LABELS)} is out of range" in str(raised.value)
    if not app_module.INPUT_RECURSIVE:
        inputs, outputs = make_examples(2)
        one_out = outputs[0] if isinstance(outputs, list) else outputs[0]
        with pytest.raises(app_module.ShapeError) as raised:
            app.feed(inputs, one_out)  # a batch of inputs, one output
        assert "the inputs are a batch" in str(raised.value)
        with pytest.raises(app_module.ShapeError) as raised:
            app.feed({"no_such_field": np.zeros(3)}, one_out)
        assert "unknown: no_such_field" in str(raised.value)
    assert app.examples() == []
    monkeypatch.setenv("EASEML_ENGINE_BIN_DIR", str(tmp_path / "no-engine"))
    with pytest.raises(app_module.EngineError) as raised:
        app.train(budget="1s")
    assert str(tmp_path / "no-engine") in str(raised.value)


def test_nan_is_a_missing_value_named_by_its_example_in_feed_and_infer(app):
    inputs, outputs = make_examples(3)
    if app_module.INPUT_RECURSIVE:
        record = inputs[1][0] if isinstance(inputs[1], list) else inputs[1]
        name = next(iter(app_module.INPUT_SHAPES))
        record[name] = np.full(app_module.INPUT_SHAPES[name], np.nan).tolist()
        expected = "example 1 (counting from 0): a value is missing (NaN)"
    else:
        name = next(iter(app_module.INPUT_SHAPES))
        array = inputs[name] if isinstance(inputs, dict) else inputs
        array[1].flat[0] = np.nan
        at = "" if int(np.prod(app_module.INPUT_SHAPES[name])) == 1 else " at " + shape_text((0,) * len(array.shape[1:]))
        expected = f"example 1 (counting from 0), field `input.{name}`: the value{at} is missing (NaN); fill it in"
    with pytest.raises(app_module.BadInputError) as raised:
        app.feed(inputs, outputs)
    assert expected in str(raised.value), str(raised.value)
    assert app.examples() == []
    # infer refuses it as an input error (not an engine failure), before asking for a model.
    with pytest.raises(app_module.BadInputError) as raised:
        app.infer(inputs)
    assert expected in str(raised.value), str(raised.value)


FEW = 8


def first(inputs, count):
    """The first `count` inputs of a batch made by `make_examples` (an array, a dict of arrays or a
    list)."""
    if isinstance(inputs, dict):
        return {name: values[:count] for name, values in inputs.items()}
    return inputs[:count]


def test_feed_train_infer_round_trip(app, tmp_path):
    inputs, outputs = make_examples(40)
    fed = app.feed(inputs, outputs)
    assert fed["added"] == 40 and len(fed["ids"]) == 40
    # One example, without the batch axis.
    one_in, one_out = make_examples(1, seed=1)
    if not app_module.INPUT_RECURSIVE:
        one_in = one_in[0] if not isinstance(one_in, dict) else {k: v[0] for k, v in one_in.items()}
    else:
        one_in = one_in[0]
    if isinstance(one_out, list):
        one_out = one_out[0]
    elif isinstance(one_out, dict):
        one_out = {k: v[0] for k, v in one_out.items()}
    else:
        one_out = one_out[0]
    if not app_module.INPUT_RECURSIVE and not isinstance(one_in, dict):
        one_in = {next(iter(app_module.INPUT_SHAPES)): one_in}  # by field name
    assert app.feed(one_in, one_out)["added"] == 1
    examples = app.examples()
    assert len(examples) == 41
    version = app.disable(examples[0]["id"])
    assert app.examples()[0]["enabled"] is False
    assert app.enable(examples[0]["id"]) > version
    if app_module.LABELS is not None:
        assert {example["label"] for example in examples} == set(app_module.LABELS[:2])

    status = app.train(budget=os.environ.get("EASEML_PY_BUDGET", "20s"))
    assert status["app"] == APP and status["examples"] == 41
    assert any(run["state"] == "done" for run in status["runs"]), status["runs"]
    assert status["best"] is not None
    # The served model follows the data: it was trained on the current version (41 examples).
    assert status["best"]["data_version"] == status["data_version"], status["best"]
    assert status["best"]["current"], status["best"]
    assert "serving " + status["best"]["candidate"] in status["summary"], status["summary"]

    answer = app.infer(inputs)
    if isinstance(answer, tuple):  # classification: (labels, confidences)
        labels, confidences = answer
        if app_module.LABELS is not None:
            known = set(app_module.LABELS)
        else:  # no declared labels: the answers are class indices of the one output tensor
            (shape,) = app_module.OUTPUT_SHAPES.values()
            known = set(range(int(np.prod(shape))))
        assert len(labels) == 40 and set(labels) <= known, (labels, known)
        assert confidences.dtype == np.float32 and ((confidences >= 0) & (confidences <= 1)).all()
        label, confidence = app.infer(one_in)
        assert label in known and 0 <= confidence <= 1
        # Every class's probability, columns in the labels' order: rows sum to 1, the largest is
        # the answered class with its confidence.
        # (On the first FEW inputs: a debug build's engine takes seconds per batch of 40 images.)
        probabilities = app.probabilities(first(inputs, FEW))
        assert probabilities.dtype == np.float32 and probabilities.shape == (FEW, len(known)), probabilities.shape
        np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-4)
        order = list(app_module.LABELS) if app_module.LABELS is not None else sorted(known)
        answered = probabilities[np.arange(FEW), [order.index(label) for label in labels[:FEW]]]
        np.testing.assert_allclose(answered, probabilities.max(axis=1), atol=1e-6)  # ties allowed
        np.testing.assert_allclose(answered, confidences[:FEW], atol=1e-6)
        assert app.probabilities(one_in).shape == (len(known),)
    elif app_module.OUTPUT_RECURSIVE:  # each answer in its JSON form: a chain is a list of records
        assert isinstance(answer, list) and len(answer) == 40, answer
        single = app.infer(one_in)
        for value in answer + [single]:
            records = value if isinstance(value, list) else [value]
            assert records, value
            for record in records:
                for name, shape in app_module.OUTPUT_SHAPES.items():
                    array = np.asarray(record[name], dtype=np.float32)
                    assert array.shape == shape and np.isfinite(array).all(), record
    else:
        for name, shape in app_module.OUTPUT_SHAPES.items():
            assert answer[name].shape == (40,) + shape and np.isfinite(answer[name]).all()
        single = app.infer(one_in)
        for name, shape in app_module.OUTPUT_SHAPES.items():
            assert single[name].shape == shape

    if not isinstance(answer, tuple):  # values, not classes: no class probabilities
        with pytest.raises(TypeError, match="not classes"):
            app.probabilities(inputs)

    if not app_module.INPUT_RECURSIVE:  # a DataFrame gives the same answers as the arrays it holds
        frame = to_frame(first(inputs, FEW))
        from_frame = app.infer(frame)
        if isinstance(answer, tuple):
            assert from_frame[0] == answer[0][:FEW]
            assert app.infer(frame.iloc[3])[0] == answer[0][3]  # one row: one input
        elif isinstance(answer, dict):
            for name in answer:
                np.testing.assert_allclose(from_frame[name], answer[name][:FEW], rtol=1e-5, atol=1e-5)

    page = app.refine(open_browser=False)
    try:
        html = urllib.request.urlopen(page.url, timeout=10).read()
        assert b"<html" in html and APP.encode() in html
    finally:
        page.close()

    # export: the served model to a folder, with its metadata; not over a folder in use unless
    # `force`. (That `model.pt` answers as `infer` does in plain Python is checked with torch by
    # runtime/engine/tests/export.rs; this venv has no torch.)
    out = tmp_path / "export"
    metadata = app.export(out)  # every model of the catalogue exports
    assert metadata["app"] == APP and metadata["format_version"] == 1, metadata
    assert metadata["run"]["id"] == status["best"]["run"], (metadata["run"], status["best"])
    assert metadata["run"]["candidate"] == status["best"]["candidate"]
    if app_module.LABELS is not None:
        assert metadata["labels"][:2] == list(app_module.LABELS[:2]), metadata["labels"]
    assert (out / metadata["model"]["file"]).exists() and (out / "README.md").is_file()
    with pytest.raises(app_module.EngineError, match="exists and is not empty"):
        app.export(out)
    assert app.export(out, force=True)["run"]["id"] == metadata["run"]["id"]


def test_file_paths_and_images_are_read_as_the_feed_command_reads_them(app, tmp_path):
    if app_module.INPUT_RECURSIVE or len(app_module.INPUT_SHAPES) != 1:
        pytest.skip("paths and images give an input of one tensor field")
    from PIL import Image

    (shape,) = app_module.INPUT_SHAPES.values()
    inputs, outputs = make_examples(2)
    one_out = outputs[0] if isinstance(outputs, list) else outputs[0]
    for index in range(2):
        np.save(tmp_path / f"x{index}.npy", inputs[index])
    assert app.feed(str(tmp_path / "x0.npy"), one_out)["added"] == 1
    both = outputs if isinstance(outputs, list) else outputs[:2]
    assert app.feed([tmp_path / "x0.npy", tmp_path / "x1.npy"], both)["added"] == 2
    with pytest.raises(app_module.BadInputError) as raised:
        app.feed(str(tmp_path / "missing.npy"), one_out)
    assert "missing.npy" in str(raised.value)
    image = Image.new("RGB", (4, 4))
    # An image gives [A,B,3] (RGB), [A,B,1] or [A,B] (grey), resized to A x B.
    takes_images = (len(shape) == 3 and shape[2] in (1, 3)) or len(shape) == 2
    if takes_images:
        assert app.feed(image, one_out)["added"] == 1
    else:
        with pytest.raises(app_module.BadInputError) as raised:
            app.feed(image, one_out)
        assert "an image can only give an input of shape [A,B,3], [A,B,1] or [A,B]" in str(raised.value)
    assert len(app.examples()) == (4 if takes_images else 3)


# -- a scientist's data: pandas and PIL ----------------------------------------------------------


def to_frame(inputs, index=None):
    """Inputs as a pandas DataFrame, a row per example: one column per number for a vector input,
    one column per field (its cells arrays) for a record, one column of arrays otherwise."""
    import pandas as pd

    if isinstance(inputs, dict):
        return pd.DataFrame({name: list(values) for name, values in inputs.items()}, index=index)
    ((name, shape),) = app_module.INPUT_SHAPES.items()
    if len(shape) == 1:
        return pd.DataFrame(inputs, columns=[f"x{i}" for i in range(shape[0])], index=index)
    return pd.DataFrame({"values": list(inputs)}, index=index)


def test_a_dataframe_feeds_with_string_labels_a_label_column_and_categoricals(app):
    if app_module.INPUT_RECURSIVE:
        pytest.skip("a DataFrame cannot hold a recursive input")
    import pandas as pd

    inputs, outputs = make_examples(12)
    frame = to_frame(inputs)
    count = 0
    if app_module.LABELS is not None:
        with_labels = frame.assign(species=outputs)
        assert app.feed(with_labels, label_column="species")["added"] == 12
        assert app.feed(frame, pd.Series(outputs, name="species").astype("category"))["added"] == 12
        assert app.feed(frame, pd.Categorical(outputs))["added"] == 12
        assert app.feed(frame, np.asarray(outputs, dtype=object))["added"] == 12
        assert app.feed(frame, pd.Series(outputs, dtype="string"))["added"] == 12
        count = 60
        labels = [example["label"] for example in app.examples()]
        assert labels == outputs * 5
        # A text column without label_column= is named, with what to do.
        if len(frame.columns) > 1:
            with pytest.raises(app_module.ShapeError) as raised:
                app.feed(with_labels, outputs)
            assert "`species` holds text: if it is the label column, give label_column='species'" in str(raised.value)
        with pytest.raises(app_module.BadInputError) as raised:
            app.feed(with_labels, label_column="kind")
        assert "no column `kind`" in str(raised.value)
        # A missing or unknown label names its row (the DataFrame's index) and column.
        broken = with_labels.set_axis(range(100, 112))
        broken.loc[104, "species"] = None
        with pytest.raises(app_module.BadInputError) as raised:
            app.feed(broken, label_column="species")
        assert str(raised.value).startswith("row 104, column `species`: the label is missing"), str(raised.value)
        broken.loc[104, "species"] = "unicorn"
        with pytest.raises(app_module.BadInputError) as raised:
            app.feed(broken, label_column="species")
        assert "row 104, column `species`: unknown label 'unicorn'" in str(raised.value), str(raised.value)
    else:
        assert app.feed(frame, outputs)["added"] == 12
        count = 12
        if not isinstance(outputs, dict) and outputs.shape[1:] == (1,):  # a column of targets
            targets = frame.assign(target=outputs[:, 0])
            assert app.feed(targets, label_column="target")["added"] == 12
            count = 24
            targets.loc[5, "target"] = np.nan
            with pytest.raises(app_module.BadInputError) as raised:
                app.feed(targets, label_column="target")
            assert "row 5, column `target`: the value is missing (NaN)" in str(raised.value), str(raised.value)

    # NaN in a DataFrame: the row (by the index) and the column, and what to do.
    column = frame.columns[-1]
    if frame[column].dtype.kind == "f":
        broken = frame.set_axis(range(10, 22))
        broken.loc[17, column] = np.nan
        expected = f"row 17, column `{column}`: the value is missing (NaN); fill it in or drop the row"
    else:  # a column of arrays: the last field's (or the only one's) values
        copied = {name: values.copy() for name, values in inputs.items()} if isinstance(inputs, dict) else inputs.copy()
        array = copied[column] if isinstance(copied, dict) else copied
        array[7].flat[1] = np.nan
        broken = to_frame(copied, index=range(10, 22))
        index = shape_text(np.unravel_index(1, array.shape[1:]))
        expected = f"row 17, column `{column}`: the value at {index} is missing (NaN); fill it in or drop the row"
    with pytest.raises(app_module.BadInputError) as raised:
        app.feed(broken, outputs)
    assert str(raised.value) == expected, str(raised.value)
    # A column the schema does not have is refused, not ignored.
    if len(app_module.INPUT_SHAPES) > 1 or len(frame.columns) == 1:
        with pytest.raises(app_module.ShapeError) as raised:
            app.feed(frame.assign(id=range(12)), outputs)
        assert "`id`" in str(raised.value), str(raised.value)
    assert len(app.examples()) == count


def test_pil_images_feed_as_the_image_loader_reads_them(app, tmp_path):
    if app_module.INPUT_RECURSIVE or len(app_module.INPUT_SHAPES) != 1:
        pytest.skip("images give an input of one tensor field")
    (shape,) = app_module.INPUT_SHAPES.values()
    grey = len(shape) == 2 or (len(shape) == 3 and shape[2] == 1)
    if not (grey or (len(shape) == 3 and shape[2] == 3)):
        pytest.skip("not an image input")
    from PIL import Image

    rng = np.random.default_rng(3)
    rows, columns = shape[0], shape[1]
    mode = "L" if grey else "RGB"
    pixels = rng.integers(0, 256, size=(rows, columns) + (() if grey else (3,)), dtype=np.uint8)
    images = [
        Image.fromarray(pixels),  # the declared size and mode: converted in Python
        Image.fromarray(pixels).convert("RGBA" if not grey else "RGB"),  # converted by the loader
        Image.fromarray(pixels).resize((columns * 2 + 1, rows + 3)),  # resized by the loader
    ]
    # Every image gives exactly what the feed command reads from the same image saved as a PNG.
    for number, image in enumerate(images):
        path = tmp_path / f"image{number}.png"
        image.save(path)
        np.testing.assert_array_equal(app._image_values(image), app._file_values(path))
    np.testing.assert_array_equal(app._image_values(images[0]), (pixels.astype(np.float32) / 255).reshape(shape))
    labels = app_module.LABELS
    outputs = [labels[0], labels[1], labels[0]] if labels is not None else make_examples(3)[1]
    assert app.feed(images, outputs)["added"] == 3
    if labels is not None:
        assert [example["label"] for example in app.examples()] == outputs
    # A larger image than the loader takes (16 times the input, at least 4096 pixels a side) is
    # refused as the feed command refuses it.
    too_large = Image.new(mode, (max(columns * 16, 4096) + 1, rows))
    with pytest.raises(app_module.BadInputError) as raised:
        app.feed(too_large, outputs[0] if labels is not None else outputs[:1][0])
    assert "are refused before decoding: resize it first" in str(raised.value), str(raised.value)
