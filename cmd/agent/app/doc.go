// Package app builds the agent's command line: flags, their validation and the wiring over
// pkg/agent.
package app
