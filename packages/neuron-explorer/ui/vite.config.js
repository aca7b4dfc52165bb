import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

// The build goes into the Python package, which serves it; base "./" keeps asset URLs relative.
export default defineConfig({
  plugins: [react()],
  base: "./",
  build: {
    outDir: "../src/neuron_explorer/server/static",
    emptyOutDir: true,
    chunkSizeWarningLimit: 2000,
    sourcemap: false,
  },
});
