// Package observe reads, and only reads, what the instance manager takes from the API server:
// its own Pod (role label; epoch, primary endpoint and standbys annotations, which the agent
// sets) and the member-local primary Lease. It polls with get and watches the two by name, so
// the instance's Role needs nothing more than get and watch on those two objects (without watch
// it polls alone), and it keeps the last answer it had when the API server cannot be reached:
// the Lease judgement then runs out at the last deadline it knew.
package observe
