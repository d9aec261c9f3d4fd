"""The trim of SeaweedFS's `weed` before it is built (e2e/s3server/build.py): its pure Go-source edits,
and the whole trim on the pinned module's files when the Go module cache holds them."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from s3server import build, install

WEED = "github.com/seaweedfs/seaweedfs/weed"

IMPORTS_GO = f"""package command

import (
\t_ "net/http/pprof"

\t_ "{WEED}/remote_storage/gcs"

\t_ "{WEED}/filer/cassandra"
\t_ "{WEED}/filer/leveldb2"
\t_ "{WEED}/filer/redis3" // a comment
\t"{WEED}/filer/posixlock"
)
"""

COMMAND_GO = """package command

var Commands = []*Command{
\tcmdAdmin,
\tcmdMini,
\tcmdShell,
\tcmdVersion,
}

type Command struct {
\tName string
}
"""

SOURCE_GO = f"""package command

import (
\t"fmt"
\t"net/http"

\t"{WEED}/glog"
\ticeberg "{WEED}/s3api/iceberg"
)

// vendor adapts one interface to another.
type vendor struct {{
\tserver string
}}

func (v vendor) Vend() (*iceberg.Credentials, error) {{
\treturn nil, nil
}}

type single int

// start starts the catalog.
func start(port int) *http.Server {{
\tif port > 0 {{
\t\tfmt.Println(port)
\t}}
\treturn iceberg.Serve(port)
}}

func other() {{
\tglog.Infof("other")
}}
"""


def test_blank_imports_under_the_prefix_go_but_the_kept_ones() -> None:
    trimmed = build.keep_blank_imports(IMPORTS_GO, "filer/", ("filer/leveldb2",))
    assert f'\t_ "{WEED}/filer/leveldb2"\n' in trimmed
    assert "cassandra" not in trimmed and "redis3" not in trimmed and "a comment" not in trimmed
    # Other prefixes, other modules and named imports stay.
    assert f'\t_ "{WEED}/remote_storage/gcs"\n' in trimmed
    assert '\t_ "net/http/pprof"\n' in trimmed
    assert f'\t"{WEED}/filer/posixlock"\n' in trimmed


def test_with_an_empty_prefix_every_blank_import_of_the_module_but_the_kept_ones_goes() -> None:
    trimmed = build.keep_blank_imports(IMPORTS_GO, "", ("filer/leveldb2",))
    assert "remote_storage" not in trimmed and "cassandra" not in trimmed
    assert "leveldb2" in trimmed and "pprof" in trimmed


def test_a_kept_blank_import_that_is_not_there_is_refused() -> None:
    with pytest.raises(ValueError, match=r"no blank import of \['filer/leveldb3'\]"):
        build.keep_blank_imports(IMPORTS_GO, "filer/", ("filer/leveldb2", "filer/leveldb3"))


def test_only_the_kept_commands_stay_listed() -> None:
    trimmed = build.keep_commands(COMMAND_GO, ("cmdMini", "cmdVersion"))
    assert "var Commands = []*Command{\n\tcmdMini,\n\tcmdVersion,\n}\n" in trimmed
    assert "cmdAdmin" not in trimmed and "cmdShell" not in trimmed
    assert trimmed.endswith("type Command struct {\n\tName string\n}\n")


@pytest.mark.parametrize(
    ("source", "error"),
    [
        (COMMAND_GO.replace("var Commands", "var commands"), "no `var Commands"),
        (COMMAND_GO.replace("\tcmdMini,\n", ""), r"no \['cmdMini'\]"),
    ],
)
def test_a_command_list_laid_out_otherwise_is_refused(source: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        build.keep_commands(source, ("cmdMini", "cmdVersion"))


def test_declarations_go_with_their_doc_comments() -> None:
    trimmed = build.drop_decls(SOURCE_GO, ("type vendor struct", "func (v vendor) Vend(", "type single "))
    assert "vendor" not in trimmed and "single" not in trimmed
    assert "// start starts the catalog.\nfunc start(port int)" in trimmed
    assert "\n\n\n" not in trimmed


def test_declarations_are_copied_with_their_doc_comments() -> None:
    copied = build.extract_decls(SOURCE_GO, ("func start(", "func other("))
    assert copied.startswith("// start starts the catalog.\nfunc start(port int) *http.Server {\n")
    assert '\treturn iceberg.Serve(port)\n}\n\nfunc other() {\n\tglog.Infof("other")\n}\n' in copied


def test_a_stubbed_function_keeps_its_signature_and_gets_the_new_body() -> None:
    trimmed = build.stub_funcs(SOURCE_GO, {"func start(": "\treturn nil\n"})
    assert "// start starts the catalog.\nfunc start(port int) *http.Server {\n\treturn nil\n}\n" in trimmed
    assert "fmt.Println" not in trimmed and "iceberg.Serve" not in trimmed
    assert 'func other() {\n\tglog.Infof("other")\n}\n' in trimmed


def test_imports_go_whether_named_or_not() -> None:
    trimmed = build.drop_imports(SOURCE_GO, (f"{WEED}/s3api/iceberg", "fmt"))
    assert "iceberg " not in trimmed.split(")")[0] and '\t"fmt"\n' not in trimmed
    assert f'import (\n\t"net/http"\n\n\t"{WEED}/glog"\n)\n' in trimmed


@pytest.mark.parametrize(
    ("edit", "error"),
    [
        (
            lambda: build.drop_decls(SOURCE_GO, ("func missing(",)),
            "0 declarations start with 'func missing\\('",
        ),
        (lambda: build.stub_funcs(SOURCE_GO, {"func ": "\treturn\n"}), "3 declarations start with 'func '"),
        (lambda: build.stub_funcs(SOURCE_GO, {"type single ": "\treturn\n"}), "not a function with a body"),
        (lambda: build.drop_imports(SOURCE_GO, ("os",)), "0 imports of 'os'"),
        (lambda: build.drop_decls("func open() {\n\treturn\n", ("func open(",)), "no closing brace"),
    ],
)
def test_an_edit_that_does_not_find_what_it_edits_is_refused(edit: Callable[[], str], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        edit()


def test_the_command_shims_borrow_what_the_kept_commands_use_from_server_go() -> None:
    server_go = (
        'package command\n\nimport (\n\t"time"\n)\n\nvar cmdServer = &Command{}\n\n'
        "// idleTimeoutSeconds converts.\nfunc idleTimeoutSeconds(seconds *int) time.Duration {\n\treturn 0\n}\n\n"
        "func newHttpServer(h http.Handler, tlsConfig *tls.Config) *http.Server {\n\treturn nil\n}\n"
    )
    shims = build.command_shims(server_go)
    assert shims.startswith(
        'package command\n\nimport (\n\t"crypto/tls"\n\t"math"\n\t"net/http"\n\t"time"\n)\n'
    )
    assert "func GetFuseCommandName() string" in shims
    assert "// idleTimeoutSeconds converts.\nfunc idleTimeoutSeconds(" in shims
    assert "func newHttpServer(" in shims and "cmdServer" not in shims


def test_each_stub_is_a_package_named_after_its_directory() -> None:
    for directory, stub in build.STUBS.items():
        assert f"\npackage {Path(directory).name}\n" in stub, directory


def test_the_cache_entry_is_not_the_untrimmed_builds() -> None:
    assert install.TOOL.prepare is build.trim
    assert install.TOOL.path().parent.parent.name == "seaweedfs-s3"


def _module_dir() -> Path | None:
    """The pinned module in the Go module cache, if it is there (a test must not download it)."""
    go = shutil.which("go") or os.environ.get("GO")
    if go is None:
        return None
    cache = subprocess.run(
        [go, "env", "GOMODCACHE"], capture_output=True, text=True, check=False
    ).stdout.strip()
    directory = Path(cache) / f"{install.MODULE}@{install.VERSION}"
    return directory if cache and directory.is_dir() else None


def test_the_trim_finds_the_pinned_modules_layout(tmp_path: Path) -> None:
    """Every edit applied to the pinned module's own files (only those the trim reads or removes, copied:
    the module is 150 MB): upstream is laid out as the trim expects. `go build` is what checks that the
    result compiles (python -m s3server install)."""
    module = _module_dir()
    if module is None:
        pytest.skip(f"{install.MODULE}@{install.VERSION} is not in the Go module cache")
    touched = {Path("weed/command") / name for name in ("server.go", "command.go", *build.COMMAND_FILES)}
    touched |= {Path(relative) for relative, *_ in (*build.BLANK_IMPORTS, *build.EDITS)}
    touched |= {Path(relative) for relative in build.REMOVED_FILES}
    touched |= {
        path.relative_to(module) for directory in build.STUBS for path in (module / directory).glob("*.go")
    }
    for relative in touched:
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(module / relative, tmp_path / relative)
    build.trim(tmp_path, tmp_path / "out")
    command = tmp_path / "weed" / "command"
    assert sorted(path.name for path in command.glob("*.go")) == sorted((*build.COMMAND_FILES, "trimmed.go"))
    assert "func idleTimeoutSeconds(" in (command / "trimmed.go").read_text()
    assert "\tcmdMini,\n\tcmdVersion,\n}" in (command / "command.go").read_text()
    assert "filer/redis3" not in (tmp_path / "weed/server/filer_server.go").read_text()
    assert not (tmp_path / build.REMOVED_FILES[0]).exists()
    for directory in build.STUBS:
        assert [path.name for path in (tmp_path / directory).glob("*.go")] == ["stub.go"]
