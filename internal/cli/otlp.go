package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpsidecar/mcpsidecar/internal/otelexport"
	"github.com/mcpsidecar/mcpsidecar/internal/timeline"
)

// exportWait bounds the export at the end of a run: a collector that is
// down or slow delays the run's end by at most this, and never changes
// its exit (issue 33).
const exportWait = 5 * time.Second

// otlpFlags are where a run's trace goes.
type otlpFlags struct {
	endpoint, protocol, file string
}

func (f *otlpFlags) add(cmd *cobra.Command, withFile bool) {
	fl := cmd.Flags()
	fl.StringVar(&f.endpoint, "otlp-endpoint", "", "send the run as an OpenTelemetry trace to this OTLP collector (http://host:4318 for http/protobuf, http://host:4317 for grpc; default: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT)")
	fl.StringVar(&f.protocol, "otlp-protocol", "", "OTLP protocol: http/protobuf or grpc (default: OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf)")
	if withFile {
		fl.StringVar(&f.file, "otlp-file", "", "write the trace as OTLP JSON to this file instead of sending it")
	}
}

func (f otlpFlags) target() otelexport.Target {
	return otelexport.Target{Endpoint: f.endpoint, Protocol: f.protocol, File: f.file}
}

// wanted reports whether the user named a collector (a flag or the
// standard variables).
func (f otlpFlags) wanted() bool {
	return f.endpoint != "" || f.file != "" || otelexport.Configured(os.Getenv)
}

// exportRunDir sends the run in runDir as one trace to t.
func exportRunDir(ctx context.Context, runDir string, t otelexport.Target) (otelexport.Stats, error) {
	tl, err := timeline.Build(runDir)
	if err != nil {
		return otelexport.Stats{}, err
	}
	exp, err := otelexport.NewExporter(ctx, t, os.Getenv)
	if err != nil {
		return otelexport.Stats{}, withCode(ExitUsage, err)
	}
	return otelexport.Export(ctx, tl, exp, nil)
}

// exportAfterRun sends a finished run when the user asked for it (what
// live did not send during the run), bounded by exportWait; a failure is
// a warning, never the run's.
func exportAfterRun(ctx context.Context, w io.Writer, f otlpFlags, runDir string, quiet bool, live *liveExport) {
	if runDir == "" || !f.wanted() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), exportWait)
	defer cancel()
	st, done, err := live.finish(ctx, runDir) // otlp_live.go
	if !done {
		st, err = exportRunDir(ctx, runDir, f.target())
	}
	if err != nil {
		fmt.Fprintf(w, "warning: OpenTelemetry export: %v (the run is unaffected; mcpsidecar runs export sends it later)\n", err)
	} else if !quiet {
		fmt.Fprintf(w, "exported the run as OpenTelemetry trace %s (%d spans, %d of them during the run)\n", st.TraceID, st.Spans, st.Live)
	}
	forwardAgentTelemetry(ctx, w, runDir, f.target(), quiet, live.relayed(ctx, runDir))
}

// forwardAgentTelemetry sends what the gateway relayed of the agent's own
// telemetry (agent_telemetry), within ctx, but the spool lines skip says
// were sent during the run; a failure is a warning.
func forwardAgentTelemetry(ctx context.Context, w io.Writer, runDir string, t otelexport.Target, quiet bool, skip func(int) bool) {
	st, err := otelexport.ForwardAgentTelemetry(ctx, runDir, t, os.Getenv, skip)
	if err != nil {
		fmt.Fprintf(w, "warning: OpenTelemetry export of the agent's own telemetry: %v\n", err)
		fmt.Fprintf(w, "  %d of the %d requests the gateway relayed reached the collector (%d during the run); all %d are kept in the run directory: mcpsidecar runs export %s sends them again\n",
			st.Sent+st.Live, st.Requests, st.Live, st.Requests, runDir)
		return
	}
	if st.Requests > 0 && !quiet {
		fmt.Fprintf(w, "sent the agent's own telemetry: %d requests (%d items) relayed by the gateway, %d requests during the run\n", st.Sent+st.Live, st.Items, st.Live)
	}
}

func newRunsExportCmd(s Streams, dir *string) *cobra.Command {
	var f otlpFlags
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "export [RUN]",
		Short: "Send a finished run (the latest by default) to an OpenTelemetry collector as one trace, or write it as OTLP JSON",
		Long: `export reads the run's record and sends it as one OpenTelemetry trace: the run at
the root, its phases, each model request (GenAI attributes), each tool call and
resource read (MCP attributes), and each egress decision under the call that caused
it, denials marked as errors; the verdict's checks and degradations are events of the
run span. Ids come from the run id: exporting a run again sends the same trace.

The collector: --otlp-endpoint, else the standard OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
or OTEL_EXPORTER_OTLP_ENDPOINT (with OTEL_EXPORTER_OTLP_HEADERS and the other
OTEL_EXPORTER_OTLP_* variables, read by the exporter); OTEL_SERVICE_NAME and
OTEL_RESOURCE_ATTRIBUTES set the resource. --otlp-file writes OTLP JSON instead.
The agent's own telemetry that the gateway relayed (agent_telemetry = true in the
spec; agent-telemetry.jsonl) is sent too: its traces, metrics and logs, over the
same protocol (with --otlp-file, they go to FILE.agent as OTLP JSON, one
TracesData, MetricsData or LogsData a line).
RUN is a run id, a unique prefix of one, or a run directory path.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref := ""
			if len(args) == 1 {
				ref = args[0]
			}
			path, err := resolveRun(*dir, ref)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			st, err := exportRunDir(ctx, path, f.target())
			if err != nil {
				return fmt.Errorf("exporting %s: %w", path, err)
			}
			fmt.Fprintf(s.Out, "trace %s: %d spans\n", st.TraceID, st.Spans)
			forwardAgentTelemetry(ctx, s.Err, path, f.target(), false, nil)
			return nil
		},
		ValidArgsFunction: completeRunIDs(dir, 1),
	}
	f.add(cmd, true)
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "give up after this long")
	return cmd
}
