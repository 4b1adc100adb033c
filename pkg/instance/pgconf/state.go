package pgconf

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// StateFile is the manager's record inside the data directory. It travels with the data (a
// restarted manager, or one on a new node with the same volume, knows the epochs), and a clone
// drops the copy it received from the primary.
const StateFile = "dbfleet-state.json"

// State is what the manager remembers across restarts.
type State struct {
	// Pod is the pod that wrote it; a state written by another pod (a copy) is ignored.
	Pod string `json:"pod"`
	// PromotedEpoch is the epoch at which this data directory was bootstrapped or promoted.
	PromotedEpoch int64 `json:"promotedEpoch,omitempty"`
	// FencedEpoch is the highest epoch at which the instance fenced itself.
	FencedEpoch int64 `json:"fencedEpoch,omitempty"`
	// RejoinedEpoch is the epoch whose primary this data directory was last rewound to follow
	// (pg_rewind). A directory promoted after that (PromotedEpoch above it) may hold writes no
	// other instance has, so it is rewound before it follows anyone again.
	RejoinedEpoch int64 `json:"rejoinedEpoch,omitempty"`
}

// ReadState reads the state of pod; a missing file or another pod's is the zero State.
func ReadState(dir, pod string) (State, error) {
	data, err := os.ReadFile(filepath.Join(dir, StateFile))
	if errors.Is(err, os.ErrNotExist) {
		return State{Pod: pod}, nil
	}
	if err != nil {
		return State{}, fmt.Errorf("read %s: %w", StateFile, err)
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return State{}, fmt.Errorf("parse %s: %w", StateFile, err)
	}
	if s.Pod != pod {
		return State{Pod: pod}, nil
	}
	return s, nil
}

// WriteState records s (atomically).
func WriteState(dir string, s State, owner *Owner) error {
	data, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	return writeFile(filepath.Join(dir, StateFile), data, owner)
}

// RemoveState drops the state file (a clone's copy of the primary's).
func RemoveState(dir string) error {
	if err := os.Remove(filepath.Join(dir, StateFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", StateFile, err)
	}
	return nil
}
