package ownwrites

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestBehindUntilTheCacheShowsTheWrite(t *testing.T) {
	var tr Tracker
	db := types.NamespacedName{Namespace: "shop", Name: "orders"}
	other := types.NamespacedName{Namespace: "shop", Name: "carts"}
	if tr.Behind(db, "5") {
		t.Fatal("behind with no write remembered")
	}
	tr.Wrote(db, "120")
	for _, rv := range []string{"5", "99", "119"} {
		if !tr.Behind(db, rv) {
			t.Errorf("cache at %s is not behind a write at 120", rv)
		}
	}
	if tr.Behind(other, "1") {
		t.Error("a write of one object made another one behind")
	}
	if tr.Behind(db, "121") {
		t.Error("cache at 121 (someone wrote after us) is behind a write at 120")
	}
	// Caught up once: forgotten, so an older copy (a relist from a lagging server) is not held.
	if tr.Behind(db, "100") {
		t.Error("the write was not forgotten once the cache caught up")
	}

	tr.Wrote(db, "200")
	if !tr.Behind(db, "150") {
		t.Error("cache at 150 is not behind a write at 200")
	}
	tr.Forget(db)
	if tr.Behind(db, "150") {
		t.Error("behind after Forget")
	}
}

// Resource versions that are not integers cannot be ordered: the controller acts on what it sees.
func TestIncomparableVersionsAreNeverBehind(t *testing.T) {
	var tr Tracker
	db := types.NamespacedName{Namespace: "shop", Name: "orders"}
	tr.Wrote(db, "a7")
	if tr.Behind(db, "a6") {
		t.Error("non-integer versions compared")
	}
	tr.Wrote(db, "12")
	if tr.Behind(db, "") {
		t.Error("an empty cached version called behind")
	}
	tr.Wrote(db, "")
	if tr.Behind(db, "3") {
		t.Error("an empty written version was remembered")
	}
}

// Last gives back what was written while the cache is behind it, and nothing once it caught up.
func TestLastGivesWhatWasWrittenWhileBehind(t *testing.T) {
	var tr Tracker
	db := types.NamespacedName{Namespace: "shop", Name: "orders"}
	tr.WroteValue(db, "120", "ready")
	if v, behind := tr.Last(db, "100"); !behind || v != "ready" {
		t.Errorf("cache at 100: %v, %v; want the value written at 120", v, behind)
	}
	if v, behind := tr.Last(db, "120"); behind || v != nil {
		t.Errorf("cache at 120: %v, %v; want nothing, caught up", v, behind)
	}
}
