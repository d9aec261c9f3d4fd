"""What a sweep after kopf's relist takes as gone (controller.relist), judged on plain bodies."""

from __future__ import annotations

from typing import Any

from streamapp.controller.relist import Listings, ghosts, gone_apps


def body(uid: str, name: str = "x", namespace: str = "ns") -> dict[str, Any]:
    return {"metadata": {"uid": uid, "name": name, "namespace": namespace}}


def test_a_listed_event_for_an_object_already_delivered_is_a_relisting() -> None:
    listings = Listings()
    first = [listings.listed_again("pods", None, body(uid)) for uid in ("a", "b")]
    watched = listings.listed_again("pods", "MODIFIED", body("a"))
    again = listings.listed_again("pods", None, body("a"))
    assert first == [False, False] and not watched and again


def test_a_deleted_and_newly_listed_object_or_another_kind_is_no_relisting() -> None:
    listings = Listings()
    listings.listed_again("pods", None, body("a"))
    listings.listed_again("pods", "DELETED", body("a"))
    assert not listings.listed_again("pods", None, body("a"))
    assert not listings.listed_again("services", None, body("b"))
    listings.listed_again("services", "ADDED", body("c"))
    assert listings.listed_again("services", None, body("c"))


def test_gone_is_what_was_indexed_before_the_list_and_is_not_in_it() -> None:
    assert ghosts({"a", "b", "c"}, {"a", "c", "d"}) == {"b"}
    assert ghosts(set(), {"a"}) == frozenset()


def test_an_app_is_gone_only_when_the_list_no_longer_names_it() -> None:
    running = {("ns", "kept"): body("1", "kept"), ("ns", "gone"): body("2", "gone")}
    listed = [body("1", "kept"), body("3", "other"), body("4", "gone", "elsewhere")]
    assert gone_apps(running, listed) == [("ns", "gone")]
