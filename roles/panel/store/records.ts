/**
 * Row shapes of the panel's core tables (store/migrations.ts). Booleans are stored as 0/1 and
 * times as RFC 3339 text, as SQLite keeps them; services turn rows into API attributes.
 */
export type UserRow = {
  id: number;
  /** A billing system's id of the user (migration 4); unique, null when none. */
  external_id: string | null;
  uuid: string;
  username: string;
  email: string;
  first_name: string;
  last_name: string;
  password: string;
  root_admin: number;
  use_totp: number;
  totp_secret: string | null;
  totp_last_step: number;
  created_at: string;
  updated_at: string;
};

export type RecoveryTokenRow = { id: number; user_id: number; token_hash: string; created_at: string };

export type SessionRow = {
  id: number;
  id_hash: string;
  user_id: number;
  two_factor_ok: number;
  ip: string;
  created_at: number;
  last_seen_at: number;
  expires_at: number;
};

export type LocationRow = { id: number; short: string; long: string; created_at: string; updated_at: string };

export type NodeRow = {
  id: number;
  uuid: string;
  name: string;
  description: string;
  location_id: number;
  fqdn: string;
  scheme: string;
  daemon_listen: number;
  public: number;
  maintenance_mode: number;
  memory: number;
  memory_overallocate: number;
  disk: number;
  disk_overallocate: number;
  token_id: string;
  token_hash: string;
  token_encrypted: string;
  created_at: string;
  updated_at: string;
};

/** The pairing token of a deleted node (its lookup id and SHA-256 hash), kept so its agent gets ERR_NODE_NOT_FOUND. */
export type DeletedNodeTokenRow = { id: number; node_id: number; node_name: string; token_id: string; token_hash: string; deleted_at: string };

export type AllocationRow = { id: number; node_id: number; ip: string; port: number; ip_alias: string | null; notes: string | null; server_id: number | null };

export type NestRow = { id: number; uuid: string; author: string; name: string; description: string; created_at: string; updated_at: string };

export type EggRow = {
  id: number;
  uuid: string;
  nest_id: number;
  author: string;
  name: string;
  description: string;
  docker_image: string;
  startup: string;
  created_at: string;
  updated_at: string;
};

export type ServerRow = {
  id: number;
  /**
   * A billing system's id of the server (migration 4); unique, null when none. Optional so a
   * whole-row insert (store.createServer) may leave it out, as NULL.
   */
  external_id?: string | null;
  uuid: string;
  identifier: string;
  name: string;
  description: string;
  owner_id: number;
  node_id: number;
  allocation_id: number | null;
  nest_id: number;
  egg_id: number;
  memory: number;
  swap: number;
  disk: number;
  io: number;
  cpu: number;
  threads: string | null;
  oom_disabled: number;
  databases: number;
  allocations: number;
  backups: number;
  startup: string;
  image: string;
  suspended: number;
  created_at: string;
  updated_at: string;
};

export type SubuserRow = { id: number; user_id: number; server_id: number; permissions: string; created_at: string; updated_at: string };

export type ApiKeyRow = {
  id: number;
  user_id: number;
  key_type: 'client' | 'application';
  identifier: string;
  token_hash: string;
  memo: string;
  allowed_ips: string;
  last_used_at: string | null;
  created_at: string;
};

export type ActivityRow = {
  id: number;
  event: string;
  ip: string;
  description: string | null;
  actor_type: string | null;
  actor_id: number | null;
  subject_type: string | null;
  subject_id: number | null;
  properties: string;
  timestamp: string;
};
