/**
 * The daemon's local admin API, served only on general.socket_path (mode 0600, so root only when
 * the daemon runs as root): status, reset, cleanup and running a job now. Paths under /api/v1.
 */
import type { Logger } from 'pino';
import { AppError } from '../../src/core/app-error.ts';
import { SERVICE_VERSION } from '../../src/core/version.ts';
import { createApiServer, type ApiServer } from '../../src/lib/http-api.ts';
import { JOBS, type Daemon, type JobName } from './daemon.ts';

/** Built once by serve.ts; the caller listens on the socket and closes it. */
export function createLocalApi(daemon: Daemon, opts: { logger?: Logger }): ApiServer {
  const api = createApiServer({ codeOnSuccess: true, version: SERVICE_VERSION, ...(opts.logger ? { logger: opts.logger } : {}) });
  api.app.register(
    async (v1) => {
      v1.get('/status', () => api.ok(daemon.status()));
      v1.post<{ Querystring: { container?: string } }>('/reset', async (req) => {
        try {
          return api.ok({ reset: await daemon.reset(req.query.container) });
        } catch (err) {
          if ((err as { code?: string }).code === 'ERR_NOT_FOUND') throw new AppError('ERR_NOT_FOUND', (err as Error).message, { status: 404 });
          throw err;
        }
      });
      v1.post<{ Params: { name: string } }>('/jobs/:name', async (req) => {
        const name = req.params.name as JobName;
        if (!JOBS.includes(name)) throw new AppError('ERR_NOT_FOUND', `unknown job ${req.params.name} (jobs: ${JOBS.join(', ')})`, { status: 404 });
        return api.ok({ job: name, result: await daemon.runJob(name) });
      });
    },
    { prefix: '/api/v1' },
  );
  return api;
}
