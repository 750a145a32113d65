import { defineConfig } from 'drizzle-kit';

// Only `drizzle-kit generate` reads this file: migrations are written to
// migrations/ and applied at runtime by migrationsApply in src/db/migrate.ts, so no database URL is needed here.
export default defineConfig({
  dialect: 'postgresql',
  schema: './src/db/schema/index.ts',
  out: './migrations',
});
