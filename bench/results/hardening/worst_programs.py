"""The worst .eml programs within the compile limits (256 KiB, the server's MAX_PROGRAM_BYTES;
1024 fields a type, rules::MAX_FIELDS), and a few over them, written to the folder given (default:
the current one). bench/results/hardening/README.md says how they are timed."""
import os
import sys
os.chdir(sys.argv[1] if len(sys.argv) > 1 else ".")
LIMIT = 256 * 1024
F = 1024
progs = {}
# 1024 unnamed + fieldN-named fields interleaved (naming), per side, then long dims to fill the bytes
half = F // 2
def formal(fields): return "[" + ",".join(fields) + "]"
inp = []
for i in range(half):
    inp.append(f"field{2*i+2} :: Tensor[1]")
    inp.append("Tensor[1]")
out = list(inp)
progs["max_fields_mixed"] = "{input: {" + formal(inp) + ", []}, output: {" + formal(out) + ", []}}\n"
# 1024 fields each side: 1 tensor + 1023 recursive
rec = [f"r{i}" for i in range(1, F)]
progs["max_recursive"] = "{input: {[Tensor[2]], " + formal(rec) + "}, output: {[Tensor[2]], " + formal(rec) + "}}\n"
# 1024 unnamed fields each side with as many dims as fit in 256 KiB
per = (LIMIT - 200) // (2 * F) - len("Tensor[],")
dims = ",".join(["1"] * (per // 2))
f = [f"Tensor[{dims}]"] * F
progs["max_fields_many_dims"] = "{input: {" + formal(f) + ", []}, output: {" + formal(f) + ", []}}\n"
# dims only
progs["max_dims"] = "Input = [" + ",".join(["1"] * ((LIMIT - 40) // 2)) + "]\nOutput = [2]\n"
# labels only
n = (LIMIT - 60) // 7
progs["max_labels"] = "Input = [3]\nlabels = [" + ",".join(f"l{i:05d}" for i in range(n)) + f"]\nOutput = [{n}]\n"
# errors: duplicates within the field cap, repeated definitions, syntax errors, bad labels
progs["errors_duplicates"] = "type Input\n" + "A :: Tensor[1]\n" * F + "end\n" + "Input = [1]\n" * ((LIMIT - 20000) // 12) + "Output = [2]\n"
progs["errors_redefinitions"] = "Input = [1]\n" * ((LIMIT - 20) // 12) + "Output = [2]\n"
progs["errors_syntax"] = "Input = [\n" * (LIMIT // 10)
progs["errors_labels"] = "Input = [3]\nOutput = [2]\nlabels = [" + ",".join(["a"] * ((LIMIT - 50) // 2)) + "]\n"
progs["open_braces"] = "{" * LIMIT
for name, text in progs.items():
    assert len(text.encode()) <= LIMIT, (name, len(text))
    open(name + ".eml", "w").write(text)
    print(name, len(text.encode()))
# Over the limits (refused with E015, quickly): 26,000 unnamed fields, 17,000 bad names.
progs_over = {
    "over_unnamed": "{input: {[" + "Tensor[1]," * 26000 + "Tensor[1]], []}, output: {[Tensor[2]], []}}\n",
    "over_bad_names": "type Input\n" + "A :: Tensor[1]\n" * 17000 + "end\nOutput = [2]\n",
}
for name, text in progs_over.items():
    assert len(text.encode()) <= LIMIT, (name, len(text))
    open(name + ".eml", "w").write(text)
    print(name, len(text.encode()))
