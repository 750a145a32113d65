CREATE TABLE "maintenance_leases" (
	"name" text PRIMARY KEY NOT NULL,
	"holder" text NOT NULL,
	"acquired_at" timestamp with time zone NOT NULL,
	"ran_at" timestamp with time zone,
	"expires_at" timestamp with time zone NOT NULL
);
