// Package timeline builds the joined story of one run from its run
// directory: it reads the harness's run-metadata.json, the agent's
// agent-turns.jsonl, the sidecar's mcp-sidecar-tool-calls.jsonl, the
// gateway's egress-decisions.jsonl, the probe suite's report.json and the
// captured output, orders every event in time, links the events that share a
// correlation id (a tool call and the egress decisions it caused), and
// renders the result as timeline.jsonl, a self-contained report.html and a
// terminal story.
//
// It only reads the run directory and only writes timeline.jsonl and
// report.html into it. It never follows a symbolic link: the workload owns
// files in that directory, and a link it planted must not make the host read
// or overwrite something outside it. Every source is untrusted: a torn,
// invalid or missing file is reported as a problem, never fatal, and every
// string reaches HTML only through html/template's escaping.
package timeline
