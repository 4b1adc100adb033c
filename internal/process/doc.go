// Package process is the one process, port and wait harness of dbfleet's tests and local tools:
// the suites under test/ (through test/framework or directly) and hack/localfed start their
// servers with it.
//
//   - Start runs a binary with its arguments, environment, log file and pid file, optionally
//     detached (its own session) so that it outlives the program that started it.
//   - Wait polls a readiness probe and fails at once, with the end of the log, when a watched
//     process exits first.
//   - Stop ends a process this program started, StopPid one started earlier and known by its pid
//     file: SIGTERM, then SIGKILL after a timeout. A pid is signalled only while it still runs a
//     command that names the caller's marker (a state directory), so a recycled pid is never hit;
//     nothing is ever stopped by name.
//   - ReservePort hands out a free 127.0.0.1 port held by a listener until the server that will
//     serve it is started (Spec.Ports), and never hands the same port out twice in one program.
//     The moment between releasing the port and the child binding it remains, so a start that
//     fails with "address already in use" is retried on fresh ports (RetryOnPortConflict).
package process
