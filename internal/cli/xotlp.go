//go:build testcommands

package cli

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// newOTLPCmd is a hidden workload for the harness's own tests: an agent
// that emits its own OpenTelemetry spans, with the OpenTelemetry SDK and
// its OTLP/HTTP exporter, configured as such a workload is, by the
// standard variables (OTEL_EXPORTER_OTLP_ENDPOINT, TRACEPARENT). With
// --proxy it sends through $HTTP_PROXY whatever $NO_PROXY says.
func newOTLPCmd(s Streams) *cobra.Command {
	var n int
	var proxy bool
	var every time.Duration
	var attrEnv []string
	cmd := &cobra.Command{
		Use:    "x-otlp",
		Short:  "Send N spans over OTLP/HTTP as the standard OTEL_* variables say (a workload for the harness's tests)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var opts []otlptracehttp.Option
			if proxy {
				opts = append(opts, otlptracehttp.WithProxy(func(*http.Request) (*url.URL, error) { return url.Parse(os.Getenv("HTTP_PROXY")) }))
			}
			opts = append(opts, otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
			exp, err := otlptracehttp.New(cmd.Context(), opts...)
			if err != nil {
				return fmt.Errorf("x-otlp: %w", err)
			}
			// One request per span; an export's failure reaches the
			// global error handler, which the workload reports.
			var failed []error
			otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { failed = append(failed, err) }))
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			ctx := propagation.TraceContext{}.Extract(cmd.Context(), propagation.MapCarrier{"traceparent": os.Getenv("TRACEPARENT")})
			tracer := tp.Tracer("x-otlp")
			for i := range n {
				if i > 0 && every > 0 {
					time.Sleep(every)
				}
				var attrs []attribute.KeyValue
				for _, name := range attrEnv {
					attrs = append(attrs, attribute.String("workload.env."+name, os.Getenv(name)))
				}
				_, sp := tracer.Start(ctx, fmt.Sprintf("agent step %d", i), trace.WithAttributes(attrs...))
				sp.End()
			}
			sctx, cancel := context.WithTimeout(context.WithoutCancel(cmd.Context()), 10*time.Second)
			defer cancel()
			if err := tp.Shutdown(sctx); err != nil {
				failed = append(failed, err)
			}
			if len(failed) > 0 {
				fmt.Fprintf(s.Out, "x-otlp: %d of %d exports failed: %v\n", len(failed), n, failed[0])
				return nil
			}
			fmt.Fprintf(s.Out, "x-otlp: %d spans sent\n", n)
			return nil
		},
	}
	cmd.Flags().IntVar(&n, "spans", 3, "how many spans")
	cmd.Flags().BoolVar(&proxy, "proxy", false, "send through $HTTP_PROXY, whatever $NO_PROXY says")
	cmd.Flags().DurationVar(&every, "every", 0, "wait this long between spans (a workload that keeps sending while it runs)")
	cmd.Flags().StringSliceVar(&attrEnv, "attribute-env", nil, "give each span the value of this environment variable as an attribute (a workload that leaks what it can read)")
	return cmd
}
