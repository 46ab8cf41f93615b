CREATE TABLE `punctual_tasks` (
	`id` bigint unsigned AUTO_INCREMENT NOT NULL,
	`task_key` varchar(191),
	`type` varchar(64) NOT NULL,
	`payload` json NOT NULL,
	`run_at` datetime(3) NOT NULL,
	`timezone` varchar(64) NOT NULL DEFAULT 'UTC',
	`status` enum('pending','running','done','failed','cancelled','skipped') NOT NULL DEFAULT 'pending',
	`attempts` int unsigned NOT NULL DEFAULT 0,
	`max_attempts` int unsigned NOT NULL DEFAULT 4,
	`misfire` enum('run','skip') NOT NULL DEFAULT 'run',
	`lease_owner` varchar(64),
	`lease_until` datetime(3),
	`last_error` text,
	`created_at` datetime(3) NOT NULL DEFAULT (UTC_TIMESTAMP(3)),
	`updated_at` datetime(3) NOT NULL DEFAULT (UTC_TIMESTAMP(3)),
	`finished_at` datetime(3),
	CONSTRAINT `tasks_id` PRIMARY KEY(`id`),
	CONSTRAINT `tasks_task_key_unique` UNIQUE(`task_key`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
--> statement-breakpoint
CREATE INDEX `tasks_status_run_at` ON `punctual_tasks` (`status`,`run_at`);