/** The service version reported by `--version`, in every envelope's meta.version and in register/heartbeat bodies. */
export const SERVICE_VERSION = '1.0.0';
