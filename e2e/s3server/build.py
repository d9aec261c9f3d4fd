"""Leave out of SeaweedFS's `weed` everything the S3 tests do not use, before it is built.

The tests run one command, ``weed mini`` (:func:`s3server.server.argv`): a master, a volume server, a
filer on its embedded leveldb store and the S3 gateway, in one process, with the Iceberg and Lance
catalogs, WebDAV and the admin UI switched off by flags. Upstream compiles every feature into every
command (one `weed/command` package), so the whole build is 1,738 packages: the filer's twenty-odd
metadata stores (Cassandra, Redis, MongoDB, YDB, TiKV, ...), notification queues, replication sinks, the
GCS/Azure SDKs of remote storage, the KMS providers, FUSE mount, SFTP, the message queue broker and its
Kafka gateway, the Iceberg catalog (iceberg-go, Arrow, Parquet, Substrait), the admin UI, ...

:func:`trim` edits the writable copy of the module :func:`localcluster.build.build_from_source` builds
from, so that `weed` has only the ``mini`` and ``version`` commands and imports only what they use: 716
packages. From an empty build cache on 2 cores (at nice 19 beside a test run) that took 144 CPU seconds
(154 s wall) against 464 (470 s) for the whole `weed`, and 0.5 GB peak memory against 1.8. Every edit is
a text edit of a file whose upstream layout it checks first; a SeaweedFS version laid out otherwise fails
the build with a :class:`ValueError` naming what was not found (and an edit that leaves Go code
inconsistent fails ``go build``). What is left out answers, where the kept code can still reach it, with
an error saying so:

- the filer stores but leveldb/leveldb2/leveldb3 (mini's embedded store; a ``filer.toml`` naming another
  one fails at start), the notification queues but ``log``, the KMS providers but ``local``, the tiered
  storage backends (rclone, S3), the credential store on Postgres;
- the remote storage clients (gcs, azure, s3: a "left out of this build" error for a remote mount);
- every command but ``mini`` and ``version``, with the Iceberg catalog server (``-s3.port.iceberg`` must
  be 0, as the tests pass it), SFTP (``startSftpServer`` logs and returns);
- the admin UI and HTTP API (mini still starts the admin server and its maintenance worker, which talk
  gRPC; ``/health`` answers), the admin's Iceberg data preview, the master's maintenance scripts and the
  worker's admin-script job (both run ``weed shell`` commands), the shell's ``mq.topic.compact``;
- image resizing, cropping and JPEG re-orientation on the volume server (images are served as stored).

Conditional writes (``If-None-Match: *``), versioning, multipart uploads, tagging and the rest of the S3
API are the gateway's own code (`weed/s3api`), which stays whole.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection, Iterable
from pathlib import Path

WEED = "github.com/seaweedfs/seaweedfs/weed"

# The commands left in `weed`'s command list (weed/command/command.go).
COMMANDS = ("cmdMini", "cmdVersion")
# The files of weed/command that stay: mini's and what it calls (the master, volume, filer, S3, WebDAV,
# admin and worker starters and their option types); every other non-test file goes.
COMMAND_FILES = (
    "admin.go",
    "autocomplete.go",
    "backends.go",
    "command.go",
    "filer.go",
    "iam.go",
    "imports.go",
    "maintenance_capabilities.go",
    "master.go",
    "mini.go",
    "s3.go",
    "sftp.go",
    "shutdown.go",
    "version.go",
    "volume.go",
    "webdav.go",
    "worker_runtime.go",
)
# Declarations the kept command files use from left-out ones (server.go would bring the message queue
# broker and agent): (file, the imports they need, declaration headers). Copied into trimmed.go.
COMMAND_BORROWED = (
    (
        "server.go",
        ("crypto/tls", "math", "net/http", "time"),
        ("func idleTimeoutSeconds(", "func newHttpServer("),
    ),
)
COMMAND_SHIMS = """
// GetFuseCommandName stands in for fuse.go's (weed.go calls it): the fuse command is left out.
func GetFuseCommandName() string {
\treturn "fuse"
}
"""
# Blank imports (registrations) kept: (file, package prefix under weed/, the kept ones). The file's other
# blank imports under the prefix go.
BLANK_IMPORTS = (
    (
        "weed/command/imports.go",
        "",
        ("filer/leveldb", "filer/leveldb2", "filer/leveldb3", "credential/filer_etc"),
    ),
    ("weed/server/filer_server.go", "filer/", ("filer/leveldb", "filer/leveldb2", "filer/leveldb3")),
    ("weed/server/filer_server.go", "notification/", ("notification/log",)),
    ("weed/command/filer.go", "credential/", ("credential/filer_etc", "credential/memory")),
    ("weed/command/iam.go", "credential/", ("credential/filer_etc", "credential/memory")),
    ("weed/s3api/auth_credentials.go", "kms/", ("kms/local",)),
    ("weed/storage/backend/all/all.go", "storage/backend/", ()),
    (
        "weed/plugin/worker/handlers/handlers.go",
        "worker/tasks/",
        (
            "worker/tasks/balance",
            "worker/tasks/ec_balance",
            "worker/tasks/erasure_coding",
            "worker/tasks/s3_lifecycle",
            "worker/tasks/vacuum",
        ),
    ),
)
# Files removed: iceberg-go's manifest readers (their callers are the admin preview and the Iceberg
# maintenance task, both left out), the shell command that reads Parquet, the worker's admin-script job.
REMOVED_FILES = (
    "weed/s3api/s3tables/iceberg_manifest.go",
    "weed/s3api/s3tables/iceberg_manifest_list.go",
    "weed/shell/command_mq_topic_compact.go",
    "weed/plugin/worker/admin_script_handler.go",
)
# Source edits: (file, imports dropped, declarations dropped, functions stubbed {header: new body}).
EDITS = (
    (
        "weed/command/s3.go",
        (f"{WEED}/s3api/iceberg",),
        ("type icebergCredentialVendor struct", "func (v icebergCredentialVendor) VendTableCredentials("),
        {
            "func (s3opt *S3Options) startIcebergServer(": (
                '\tglog.Errorf("the Iceberg REST catalog is left out of this build")\n\treturn nil\n'
            )
        },
    ),
    (
        "weed/command/sftp.go",
        (
            "context",
            "fmt",
            "runtime",
            f"{WEED}/pb",
            f"{WEED}/pb/filer_pb",
            f"{WEED}/security",
            f"{WEED}/sftpd",
            f"{WEED}/util/grace",
            f"{WEED}/util/version",
        ),
        (),
        {
            "func (sftpOpt *SftpOptions) startSftpServer(": (
                '\tglog.Errorf("the SFTP server is left out of this build")\n\treturn false\n'
            )
        },
    ),
    (
        "weed/admin/dash/iceberg_data_preview.go",
        ("github.com/apache/iceberg-go", "github.com/parquet-go/parquet-go", "encoding/json", "slices"),
        (
            "func (s *AdminServer) listIcebergDataFiles(",
            "func (s *AdminServer) readParquetRows(",
            "func formatParquetRow(",
            "func formatParquetValue(",
        ),
        {
            "func (s *AdminServer) GetIcebergTableDataPreview(": (
                '\treturn IcebergDataPreviewData{}, fmt.Errorf("the Iceberg data preview is left out of this build")\n'
            )
        },
    ),
    (
        "weed/server/master_server.go",
        ("os", "regexp", f"{WEED}/cluster/maintenance", f"{WEED}/shell"),
        ("func processEachCmd(",),
        {
            "func (ms *MasterServer) startAdminScripts(": (
                '\tif util.GetViper().GetString("master.maintenance.scripts") != "" {\n'
                '\t\tglog.Errorf("master.maintenance.scripts: the shell is left out of this build")\n'
                "\t}\n"
            )
        },
    ),
)
# Packages whose files are replaced by a stub with the API the kept code calls.
_REMOTE_STUB_IMPORTS = f"""import (
\t"errors"
\t"net/http"

\t"{WEED}/pb/remote_pb"
\t"{WEED}/remote_storage"
)
"""
STUBS = {
    "weed/remote_storage/gcs": f"""// Package gcs is a stub: the trimmed build leaves the GCS client out.
package gcs

{_REMOTE_STUB_IMPORTS}
var errLeftOut = errors.New("gcs remote storage is left out of this build")

var StaticKeyCredentialTypes = []string{{"service_account", "authorized_user"}}

func ParseInlineCredentials(creds string) (credType string, tokenURL string, err error) {{
\treturn "", "", errLeftOut
}}

func MakeWithHTTPClient(conf *remote_pb.RemoteConf, httpClient *http.Client, allowedTypes ...string) (remote_storage.RemoteStorageClient, error) {{
\treturn nil, errLeftOut
}}
""",
    "weed/remote_storage/azure": f"""// Package azure is a stub: the trimmed build leaves the Azure client out.
package azure

{_REMOTE_STUB_IMPORTS}
func MakeWithHTTPClient(conf *remote_pb.RemoteConf, httpClient *http.Client) (remote_storage.RemoteStorageClient, error) {{
\treturn nil, errors.New("azure remote storage is left out of this build")
}}
""",
    "weed/remote_storage/s3": f"""// Package s3 is a stub: the trimmed build leaves the S3-compatible remote storage client out.
package s3

{_REMOTE_STUB_IMPORTS}
func S3CompatibleEndpoint(conf *remote_pb.RemoteConf) (string, bool) {{
\treturn "", false
}}

func UsesDefaultCredentialChain(conf *remote_pb.RemoteConf) bool {{
\treturn false
}}

func ResolvedCredentials(conf *remote_pb.RemoteConf) (accessKey, secretKey string, ok bool) {{
\treturn "", "", false
}}

func MakeWithHTTPClient(conf *remote_pb.RemoteConf, httpClient *http.Client) (remote_storage.RemoteStorageClient, error) {{
\treturn nil, errors.New("s3 remote storage is left out of this build")
}}
""",
    "weed/images": """// Package images is a stub: the trimmed build serves images as stored.
package images

import "io"

func Resized(ext string, read io.ReadSeeker, width, height int, mode string) (resized io.ReadSeeker, w int, h int) {
\treturn read, 0, 0
}

func Cropped(ext string, read io.ReadSeeker, x1, y1, x2, y2 int) (cropped io.ReadSeeker, err error) {
\treturn read, nil
}

func FixJpgOrientation(data []byte) (oriented []byte) {
\treturn data
}
""",
    "weed/admin/handlers": f"""// Package handlers is a stub: the trimmed build serves no admin UI or HTTP API, only /health (mini
// waits for it before it starts the maintenance worker, which talks gRPC to the admin server).
package handlers

import (
\t"net/http"

\t"github.com/gorilla/mux"
\t"github.com/gorilla/sessions"

\t"{WEED}/admin/dash"
)

type AdminHandlers struct{{}}

func NewAdminHandlers(adminServer *dash.AdminServer, store sessions.Store) *AdminHandlers {{
\treturn &AdminHandlers{{}}
}}

func (h *AdminHandlers) SetupRoutes(r *mux.Router, authRequired bool, adminUser, adminPassword, readOnlyUser, readOnlyPassword string, enableUI bool) {{
\tr.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) {{
\t\tw.Header().Set("Content-Type", "application/json")
\t\tw.Write([]byte(`{{"health":"ok"}}`))
\t}}).Methods(http.MethodGet)
}}
""",
}

_BLANK_IMPORT = re.compile(rf'^\t_ "{re.escape(WEED)}/([^"]+)"[^\n]*\n', re.M)


def keep_blank_imports(source: str, prefix: str, keep: Collection[str]) -> str:
    """``source`` without its blank imports of packages ``weed/<prefix>...`` other than ``keep``; pure.
    Raises if one of ``keep`` is not imported so."""
    found = {match.group(1) for match in _BLANK_IMPORT.finditer(source) if match.group(1).startswith(prefix)}
    missing = set(keep) - found
    if missing:
        raise ValueError(f"no blank import of {sorted(missing)} under weed/{prefix}")

    def kept(match: re.Match[str]) -> str:
        package = match.group(1)
        return match.group(0) if not package.startswith(prefix) or package in keep else ""

    return _BLANK_IMPORT.sub(kept, source)


def keep_commands(source: str, commands: Collection[str] = COMMANDS) -> str:
    """command.go's source with only ``commands`` in its ``var Commands`` list; pure. Raises if the
    list or one of ``commands`` in it is missing."""
    match = re.search(r"^var Commands = \[\]\*Command\{\n(.*?)^\}\n", source, re.M | re.S)
    if match is None:
        raise ValueError("no `var Commands = []*Command{` list")
    listed = set(re.findall(r"^\t(\w+),\n", match.group(1), re.M))
    missing = set(commands) - listed
    if missing:
        raise ValueError(f"the command list has no {sorted(missing)}")
    kept = "".join(f"\t{name},\n" for name in commands)
    return source[: match.start(1)] + kept + source[match.end(1) :]


def _declaration(lines: list[str], header: str) -> tuple[int, int, int]:
    """(first line of its doc comment, first line, line after the last) of the one top-level declaration
    whose first line starts with ``header``. gofmt'd source: a block's closing ``}`` is the first line
    at column 0 that is only ``}``."""
    starts = [i for i, line in enumerate(lines) if line.startswith(header)]
    if len(starts) != 1:
        raise ValueError(f"{len(starts)} declarations start with {header!r}, expected 1")
    start = starts[0]
    comment = start
    while comment > 0 and lines[comment - 1].startswith("//"):
        comment -= 1
    if not lines[start].rstrip().endswith("{"):
        return comment, start, start + 1
    end = next((i for i in range(start + 1, len(lines)) if lines[i].rstrip("\n") == "}"), None)
    if end is None:
        raise ValueError(f"the declaration {header!r} has no closing brace")
    return comment, start, end + 1


def drop_decls(source: str, headers: Iterable[str]) -> str:
    """``source`` without the top-level declarations whose first lines start with ``headers``, their doc
    comments and the blank line after each; pure."""
    lines = source.splitlines(keepends=True)
    for header in headers:
        comment, _, end = _declaration(lines, header)
        if end < len(lines) and lines[end] == "\n":
            end += 1
        del lines[comment:end]
    return "".join(lines)


def extract_decls(source: str, headers: Iterable[str]) -> str:
    """The top-level declarations whose first lines start with ``headers``, with their doc comments,
    separated by blank lines; pure."""
    lines = source.splitlines(keepends=True)
    spans = [_declaration(lines, header) for header in headers]
    return "\n".join("".join(lines[comment:end]) for comment, _, end in spans)


def stub_funcs(source: str, bodies: dict[str, str]) -> str:
    """``source`` with the bodies of the functions whose first lines start with the keys of ``bodies``
    replaced by the values; pure."""
    lines = source.splitlines(keepends=True)
    for header, body in bodies.items():
        _, start, end = _declaration(lines, header)
        if end - start < 2:
            raise ValueError(f"{header!r} is not a function with a body")
        lines[start + 1 : end - 1] = [body]
    return "".join(lines)


def drop_imports(source: str, paths: Iterable[str]) -> str:
    """``source`` without its (possibly named) imports of ``paths``, one per line in an import block;
    pure. Raises if one is not imported exactly once."""
    for path in paths:
        line = re.compile(rf'^\t(?:\w+ )?"{re.escape(path)}"\n', re.M)
        source, count = line.subn("", source)
        if count != 1:
            raise ValueError(f"{count} imports of {path!r}, expected 1")
    return source


def edit(source: str, imports: Iterable[str], decls: Iterable[str], bodies: dict[str, str]) -> str:
    """One of :data:`EDITS`: ``source`` without ``decls``, with the functions of ``bodies`` stubbed and
    without ``imports`` (those only the dropped code used); pure."""
    return drop_imports(stub_funcs(drop_decls(source, decls), bodies), imports)


def command_shims(server_go: str) -> str:
    """weed/command/trimmed.go: :data:`COMMAND_SHIMS` and the :data:`COMMAND_BORROWED` declarations
    (taken from ``server_go``, the only file they are borrowed from); pure."""
    ((name, imports, headers),) = COMMAND_BORROWED
    assert name == "server.go"
    block = "".join(f'\t"{path}"\n' for path in sorted(imports))
    return f"package command\n\nimport (\n{block})\n{COMMAND_SHIMS}\n{extract_decls(server_go, headers)}"


def trim(source: Path, out: Path) -> None:
    """Edit the module copy ``source`` down to what ``weed mini`` serving S3 needs (the module
    docstring says what goes); ``out`` (the cache entry) gets nothing."""
    del out
    try:
        _trim(source)
    except (ValueError, FileNotFoundError) as error:
        raise ValueError(
            f"cannot trim SeaweedFS in {source} (not the layout this trim knows): {error}"
        ) from None


def _trim(source: Path) -> None:
    command = source / "weed" / "command"
    shims = command_shims((command / "server.go").read_text())
    for path in command.glob("*.go"):
        if path.name not in COMMAND_FILES:
            path.unlink()
    (command / "trimmed.go").write_text(shims)
    _rewrite(command / "command.go", keep_commands)
    for relative, prefix, keep in BLANK_IMPORTS:
        _rewrite(source / relative, functools.partial(keep_blank_imports, prefix=prefix, keep=keep))
    for relative in REMOVED_FILES:
        (source / relative).unlink()
    for relative, imports, decls, bodies in EDITS:
        _rewrite(source / relative, functools.partial(edit, imports=imports, decls=decls, bodies=bodies))
    for relative, stub in STUBS.items():
        directory = source / relative
        files = list(directory.glob("*.go"))
        if not files:
            raise FileNotFoundError(f"no Go files in {relative}")
        for path in files:
            path.unlink()
        (directory / "stub.go").write_text(stub)


def _rewrite(path: Path, edit: Callable[[str], str]) -> None:
    """Replace ``path``'s text by ``edit(text)``, naming the file when the edit finds it unexpected."""
    try:
        path.write_text(edit(path.read_text()))
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
