-- Schedule names are per tenant: two tenants' schedules of one name are two schedules.
ALTER TABLE "schedules" DROP CONSTRAINT "schedules_pkey";--> statement-breakpoint
ALTER TABLE "schedules" ADD CONSTRAINT "schedules_tenant_id_name_pk" PRIMARY KEY("tenant_id","name");
