// Package reaper reaps the orphans that the instance manager, PID 1 of its container, adopts:
// when postgres's postmaster dies at once (SIGKILL, the out-of-memory killer), its backends
// exit as orphans, and with nobody to wait for them they stay zombies for good, a crash loop
// piling them up by the dozen.
package reaper
