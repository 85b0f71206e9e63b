// Stand-in for @copilotkit/runtime, a peer of @ag-ui/mastra that only its
// `@ag-ui/mastra/copilotkit` entry imports (not used here): importing it fails
// loudly rather than pulling the whole CopilotKit runtime into the test install.
throw new Error('@copilotkit/runtime is not installed in tests/node (see shims/README.md)');
