package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
)

func main() {
	pkgs, err := list()
	if err != nil {
		fmt.Fprintln(os.Stderr, "layering:", err)
		os.Exit(2)
	}
	bad := violations(pkgs)
	for _, v := range bad {
		fmt.Fprintln(os.Stderr, v)
	}
	if len(bad) > 0 {
		fmt.Fprintf(os.Stderr, "layering: %d imports run back up the house (rules in hack/layering/rules.go)\n", len(bad))
		os.Exit(1)
	}
	fmt.Printf("layering: %d packages, no import runs back up\n", len(pkgs))
}

// list runs `go list -json ./...` (non-test packages and their transitive dependencies).
func list() ([]pkg, error) {
	cmd := exec.Command("go", "list", "-json=ImportPath,Deps", "./...")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var pkgs []pkg
	dec := json.NewDecoder(out)
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("read go list: %w", err)
		}
		pkgs = append(pkgs, p)
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	return pkgs, nil
}
