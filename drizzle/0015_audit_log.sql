CREATE TABLE `punctual_audit_log` (
	`id` bigint unsigned AUTO_INCREMENT NOT NULL,
	`at` datetime(3) NOT NULL,
	`actor` varchar(64) NOT NULL,
	`role` varchar(8) NOT NULL,
	`request_id` varchar(64) NOT NULL,
	`action` varchar(32) NOT NULL,
	`target` varchar(255) NOT NULL,
	`status` smallint unsigned NOT NULL,
	`detail` json,
	CONSTRAINT `audit_log_id` PRIMARY KEY(`id`)
);
--> statement-breakpoint
CREATE INDEX `audit_log_at` ON `punctual_audit_log` (`at`);--> statement-breakpoint
CREATE INDEX `audit_log_actor` ON `punctual_audit_log` (`actor`,`id`);--> statement-breakpoint
CREATE INDEX `audit_log_target` ON `punctual_audit_log` (`target`,`id`);