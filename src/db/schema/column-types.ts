import { customType } from 'drizzle-orm/pg-core';

/** A full transaction id (pg_current_xact_id()), compared with pg_visible_in_snapshot. */
export const xid8 = customType<{ data: string }>({ dataType: () => 'xid8' });
