"""The wrapper module repeats upstream's module replaces (replaces apply only in the main module)."""

from __future__ import annotations

from localcluster import gowrapper

SEAWEEDFS_LIKE = """module github.com/seaweedfs/seaweedfs

go 1.26.6

require github.com/tyler-smith/go-bip39 v1.1.0 // indirect

// replace github.com/seaweedfs/raft => /Users/someone/go/src/github.com/seaweedfs/raft

// tyler-smith/go-bip39 was deleted from GitHub
replace github.com/tyler-smith/go-bip39 => github.com/cosmos/go-bip39 v1.0.0
"""

BLOCK = """module example.com/m

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tgolang.org/x/net/http2 => golang.org/x/net/http2 v0.23.0 // pinned
\texample.com/a v1.2.0 => example.com/b v1.3.0
)
"""


def test_a_module_replaced_by_a_published_module_is_repeated_and_comments_are_not() -> None:
    assert gowrapper.module_replaces(SEAWEEDFS_LIKE) == {
        "github.com/tyler-smith/go-bip39": "github.com/cosmos/go-bip39 v1.0.0"
    }


def test_in_a_block_local_paths_are_left_out_and_version_specific_replaces_kept() -> None:
    # A local path has no published target (Kubernetes' staging modules get theirs separately).
    assert gowrapper.module_replaces(BLOCK) == {
        "golang.org/x/net/http2": "golang.org/x/net/http2 v0.23.0",
        "example.com/a v1.2.0": "example.com/b v1.3.0",
    }


def test_the_wrapper_go_mod_carries_them() -> None:
    text = gowrapper.render(
        module="streamapp.dev/e2e/build/seaweedfs",
        go="1.26.6",
        requires={"github.com/seaweedfs/seaweedfs": "v0.0.0-x"},
        tools=["github.com/seaweedfs/seaweedfs/weed"],
        replaces=gowrapper.module_replaces(SEAWEEDFS_LIKE),
    )
    assert "\tgithub.com/tyler-smith/go-bip39 => github.com/cosmos/go-bip39 v1.0.0\n" in text
